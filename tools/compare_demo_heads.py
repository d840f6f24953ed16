"""Train every demo head on Context Shapes over several seeds; write a table and a bar chart.

Usage::

    python tools/compare_demo_heads.py                       # 5 heads x seeds 0 1 2
    python tools/compare_demo_heads.py --seeds 0 --max-iters 50 --out-dir /tmp/cmp   # quick look

Each run is ``tools/run_demo.py`` in its own process (same backbone, data, schedule; only the
head and the seed change), so runs are independent and an interrupted comparison resumes: runs
whose result JSON exists are not repeated (``--force`` repeats them). Writes into ``--out-dir``
(default ``work_dirs/demo_compare``): ``results.md`` (mean and std of val mIoU, the per-seed
values, parameters, train time), ``results.png`` (bar chart) and ``runs.json`` (every run).
``--docs-prefix docs/demo_results`` also writes ``docs/demo_results.md`` and ``.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import os.path as osp
import shlex
import shutil
import subprocess
import sys
import time
from typing import Any, Optional

import numpy as np

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DEMO = "configs/demo"
#: (display name, config) in table order: the local baseline first.
HEADS: list[tuple[str, str]] = [
    ("FCN", f"{DEMO}/fcn_r18-d8_context-shapes.py"),
    ("HamHead-NMF", f"{DEMO}/hamhead-nmf_r18-d8_context-shapes.py"),
    ("HamHead-CD", f"{DEMO}/hamhead-cd_r18-d8_context-shapes.py"),
    ("HamHead-VQ", f"{DEMO}/hamhead-vq_r18-d8_context-shapes.py"),
    ("NonLocal", f"{DEMO}/nonlocal_r18-d8_context-shapes.py"),
]


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--heads",
        nargs="+",
        default=[n for n, _ in HEADS],
        help="subset of: " + " ".join(n for n, _ in HEADS),
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--max-iters", type=int, default=None, help="override the schedule length")
    p.add_argument("--data-root", default="data/context_shapes")
    p.add_argument("--out-dir", default="work_dirs/demo_compare")
    p.add_argument("--docs-prefix", default=None, help="also write <prefix>.md and <prefix>.png")
    p.add_argument("--force", action="store_true", help="repeat runs that already have results")
    return p.parse_args(argv)


def run_one(config: str, seed: int, args: argparse.Namespace, work_dir: str) -> dict[str, Any]:
    """Train and validate one head with one seed in a fresh process; return its result."""
    out_json = osp.join(work_dir, "demo_result.json")
    if osp.isfile(out_json) and not args.force:
        with open(out_json, encoding="utf-8") as f:
            return json.load(f)
    cmd = [
        sys.executable,
        osp.join(ROOT, "tools", "run_demo.py"),
        "--config",
        config,
        "--seed",
        str(seed),
        "--work-dir",
        work_dir,
        "--data-root",
        args.data_root,
        "--no-vis",
    ]
    if args.max_iters is not None:
        cmd += ["--max-iters", str(args.max_iters)]
    os.makedirs(work_dir, exist_ok=True)
    log_path = osp.join(work_dir, "run.log")
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"run failed ({proc.returncode}): {shlex.join(cmd)}; see {log_path}")
    with open(out_json, encoding="utf-8") as f:
        return json.load(f)


def summarise(runs: list[dict[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    """Per head: mean/std (ddof=0) of mIoU over seeds, params and median train time per run."""
    rows = []
    for name in order:
        mine = sorted((r for r in runs if r["name"] == name), key=lambda r: r["seed"])
        if not mine:
            continue
        miou = np.array([r["mIoU"] for r in mine])
        rows.append(
            dict(
                name=name,
                mean=float(miou.mean()),
                std=float(miou.std()),
                per_seed=[float(v) for v in miou],
                seeds=[r["seed"] for r in mine],
                params=mine[0]["params"],
                head_params=mine[0]["head_params"],
                train_time=float(np.median([r["train_time_s"] for r in mine])),
                max_iters=mine[0]["max_iters"],
            )
        )
    return rows


def markdown(rows: list[dict[str, Any]], runs: list[dict[str, Any]], command: str) -> str:
    """The results table, with the command, the machine, run times and the effect."""
    from importlib.metadata import version

    lines = [
        "| Head | val mIoU (mean ± std) | per seed | params (total / head) | train time (median) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        seeds = ", ".join(f"{v:.1f}" for v in r["per_seed"])
        lines.append(
            f"| {r['name']} | **{r['mean']:.1f}** ± {r['std']:.1f} | {seeds} | "
            f"{r['params'] / 1e6:.2f}M / {r['head_params'] / 1e6:.3f}M | {r['train_time']:.0f} s |"
        )
    by = {r["name"]: r for r in rows}
    total = sum(r["total_time_s"] for r in runs)
    text = [
        f"Context Shapes (400 train / 100 val images, 128 x 128, 7 classes), seeds "
        f"{rows[0]['seeds']}, {rows[0]['max_iters']} iterations of batch 8 per run; the same "
        "backbone (ResNetV1c-18, base 16, output stride 8, from scratch), data and schedule for "
        "every head. mIoU on the 100 validation images; std over seeds (ddof=0); train time is "
        "the wall time of the training iterations of one run (median over seeds).",
        "",
        *lines,
        "",
    ]
    if "FCN" in by and "HamHead-NMF" in by:
        gap = by["HamHead-NMF"]["mean"] - by["FCN"]["mean"]
        text += [f"HamHead-NMF minus FCN: **{gap:+.1f}** mIoU points.", ""]
    text += [
        f"Command: `{command}`",
        "",
        f"Machine: {os.cpu_count()} CPU cores, 1-minute load average {os.getloadavg()[0]:.2f} "
        f"when this table was written, torch {version('torch')}, "
        f"mmseg {version('mmsegmentation')}. "
        f"{len(runs)} runs, {total / 60:.1f} min of training and evaluation in total "
        "(each run in its own process, including start-up).",
    ]
    return "\n".join(text) + "\n"


def bar_chart(rows: list[dict[str, Any]], out: str) -> None:
    """Bars of mean mIoU with std error bars and the per-seed values as dots."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"FCN": "0.6", "NonLocal": "tab:purple"}
    fig, ax = plt.subplots(figsize=(6.4, 3.8), dpi=120)
    x = np.arange(len(rows))
    for i, r in enumerate(rows):
        c = colours.get(r["name"], "tab:red" if r["name"] == "HamHead-NMF" else "tab:orange")
        ax.bar(i, r["mean"], yerr=r["std"], color=c, capsize=4, width=0.65)
        ax.scatter(np.full(len(r["per_seed"]), i), r["per_seed"], color="k", s=10, zorder=3)
        ax.text(i, r["mean"] + r["std"] + 1.5, f"{r['mean']:.1f}", ha="center", fontsize=8)
    ax.set_xticks(x, [r["name"] for r in rows], fontsize=8)
    ax.set_ylabel("val mIoU (%)")
    ax.set_ylim(0, 105)
    ax.set_title(
        f"Context Shapes, ResNetV1c-18 OS8, {rows[0]['max_iters']} iters, "
        f"{len(rows[0]['seeds'])} seeds (dots)",
        fontsize=9,
    )
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main(argv: Optional[list[str]] = None) -> int:
    """Run the comparison; returns the exit code."""
    args = parse_args(argv)
    known = dict(HEADS)
    unknown = [h for h in args.heads if h not in known]
    if unknown:
        print(f"error: unknown heads {unknown}; choose from {list(known)}", file=sys.stderr)
        return 2
    command = "python tools/compare_demo_heads.py " + shlex.join(
        sys.argv[1:] if argv is None else argv
    )
    start = time.perf_counter()
    sys.path.insert(0, ROOT)
    from tools.run_demo import ensure_data  # noqa: E402  (generates data once, before the runs)

    ensure_data(args.data_root, argparse.Namespace(data_size=None, num_train=None, num_val=None))
    runs = []
    total = len(args.heads) * len(args.seeds)
    k = 0
    for name in args.heads:
        for seed in args.seeds:
            k += 1
            work_dir = osp.join(
                args.out_dir, osp.splitext(osp.basename(known[name]))[0], f"seed{seed}"
            )
            t = time.perf_counter()
            print(f"[{k}/{total}] {name} seed {seed} ...", end=" ", flush=True)
            res = run_one(known[name], seed, args, work_dir)
            res["name"] = name
            runs.append(res)
            print(f"mIoU {res['mIoU']:.1f} ({time.perf_counter() - t:.0f} s)", flush=True)
    wall = time.perf_counter() - start
    rows = summarise(runs, args.heads)
    os.makedirs(args.out_dir, exist_ok=True)
    md = "# Demo heads on Context Shapes\n\n" + markdown(rows, runs, command.strip())
    md_path, png_path = osp.join(args.out_dir, "results.md"), osp.join(args.out_dir, "results.png")
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(md)
    bar_chart(rows, png_path)
    with open(osp.join(args.out_dir, "runs.json"), "w", encoding="utf-8") as f:
        json.dump(dict(runs=runs, summary=rows, wall_time_s=wall), f, indent=2)
    if args.docs_prefix:
        os.makedirs(osp.dirname(osp.abspath(args.docs_prefix)), exist_ok=True)
        shutil.copyfile(md_path, args.docs_prefix + ".md")
        shutil.copyfile(png_path, args.docs_prefix + ".png")
    print(md)
    print(f"wrote {md_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
