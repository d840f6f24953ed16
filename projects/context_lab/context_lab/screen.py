"""The task screen: which generated task separates a context head from both controls?

    python -m projects.context_lab.context_lab.screen --jobs 14 --deadline-s 720   # one GPU
    python -m projects.context_lab.context_lab.screen --dry-run                    # CPU check

Trains FCN (local control), GAP (global pooling control), NonLocal and HamHead-NMF on every
candidate task (:mod:`.tasks`) for 2,000 iterations over seeds 0-2 (``--jobs`` runs at a time,
seed 0 of every task first, so that a lease that ends early still covers every task), and
writes ``verdict.json`` and ``verdict.md``: a task separates when both controls' medians stay
below ``--threshold`` and a context head's median reaches it. The default, 80 mIoU, is the
7-class mIoU of a head whose four local classes are right (~98 IoU) and whose three team
classes reach ~56 IoU: between the chance plateau of every control measured so far (59-64) and
a solved task (95-97). ``--dry-run``: 2 iterations on 64-pixel tasks of 16 images, seed 0, in
this process; it writes the same files.
"""

from __future__ import annotations

import json
import os.path as osp
import statistics
import sys
import time
from typing import Any, Optional

from . import compare

CANDIDATES = ("keyed", "column", "nearer", "count", "pairs")
HEADS = ("fcn", "gap", "nonlocal", "ham-nmf")
CONTROLS = ("local", "global pooling")


def verdict(runs: list[dict[str, Any]], threshold: float) -> dict[str, dict[str, Any]]:
    """Per task: each head's median over its seeds, and ``separates``: every control's median
    below ``threshold`` and some context head's at or above it (None while a head has no run)."""
    out: dict[str, dict[str, Any]] = {}
    for run in runs:
        task = out.setdefault(run["task"], dict(medians={}, values={}, kinds={}))
        task["values"].setdefault(run["name"], []).append(compare.final_value(run, "paper"))
        task["kinds"][run["name"]] = run["kind"]
    for task in out.values():
        task["medians"] = {k: statistics.median(v) for k, v in task["values"].items()}
        controls = [m for k, m in task["medians"].items() if task["kinds"][k] in CONTROLS]
        context = [m for k, m in task["medians"].items() if task["kinds"][k] not in CONTROLS]
        complete = len(controls) == len(CONTROLS) and context
        best = max(context, default=0.0)
        task["separates"] = bool(max(controls) < threshold <= best) if complete else None
    return out


def markdown(result: dict[str, Any], threshold: float) -> str:
    """One row per task: the medians (seeds in brackets) and the verdict."""
    names = list(dict.fromkeys(n for t in result.values() for n in t["medians"]))
    lines = [f"| task | {' | '.join(names)} | separates (threshold {threshold:g}) |"]
    lines.append("|---" * (len(names) + 2) + "|")
    for name, t in result.items():
        cells = [
            f"{t['medians'][n]:.1f} ({len(t['values'][n])})" if n in t["medians"] else "-"
            for n in names
        ]
        word = {True: "**yes**", False: "no", None: "incomplete"}[t["separates"]]
        lines.append(f"| {name} | {' | '.join(cells)} | {word} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> None:
    p = compare.parser(__doc__)
    p.set_defaults(heads=list(HEADS), max_iters=2000, curve_interval=500, eval_runs=1)
    p.set_defaults(threshold=80.0, out_dir="work_dirs/screen")
    p.add_argument("--tasks", nargs="+", choices=list(compare.tasks.TASKS), default=CANDIDATES)
    p.add_argument("--deadline-s", type=float, help="start no run after this many seconds")
    p.add_argument("--dry-run", action="store_true", help="2 iterations on tiny tasks, here")
    args = p.parse_args(argv)
    options = dict(args.cfg_options or {})
    if args.dry_run:
        args.seeds, args.max_iters, args.curve_interval, args.jobs = [0], 2, 1, 1
        for loader in ("train_dataloader", "val_dataloader"):
            options.update({f"{loader}.num_workers": 0, f"{loader}.persistent_workers": False})
    common = dict(max_iters=args.max_iters, curve_interval=args.curve_interval, cfg_options=options)
    common.update(eval_runs=args.eval_runs, size=64 if args.dry_run else 128)
    configs = []
    for seed in args.seeds:
        for task in args.tasks:
            root, data = compare.task_data(task, None, args.dry_run)
            for key in args.heads:
                work_dir = osp.join(args.out_dir, task, key, f"seed{seed}")
                configs.append(
                    compare.run_config(
                        key, compare.HEADS[key], seed, work_dir, root, data, **common
                    )
                )
                configs[-1].lab.task = task
    deadline = time.time() + args.deadline_s if args.deadline_s else None
    runs = compare.run_all(configs, args.jobs, args.force, deadline)
    result = verdict(runs, args.threshold)
    result.update(
        {t: dict(medians={}, values={}, separates=None) for t in args.tasks if t not in result}
    )
    with open(osp.join(args.out_dir, "verdict.json"), "w", encoding="utf-8") as f:
        json.dump(dict(threshold=args.threshold, command=sys.argv, tasks=result), f, indent=1)
    md = markdown(result, args.threshold)
    with open(osp.join(args.out_dir, "verdict.md"), "w", encoding="utf-8") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    from hamseg.cli import run_cli

    run_cli(main)
