"""Compare decode heads over seeds on a task, every head under one evaluation protocol.

    python -m projects.context_lab.context_lab.compare --heads fcn gap ham-nmf nonlocal \\
        --seeds 0 1 2 --task rooms --out-dir work_dirs/compare [--jobs 12]

Each run (head x seed) trains from a config written into ``<out-dir>/<task>/<head>/seed<N>/``,
is evaluated under the paper's protocol (a fresh random dictionary per forward, the mean of
``--eval-runs`` evaluations) and hamseg's ensemble (12 seeded draws), and leaves ``run.json``
(values, learning curve, params, MACs, training machine); a finished run is reused. ``--jobs
N`` trains N runs at a time, each in its own process (a GPU holds many); 1 trains in this one.
Writes ``results.md`` (:mod:`.stats`: intervals, rank tests within one backbone and one
machine, Holm's correction), ``results.png`` and ``runs.json``; ``--from-runs runs.json``
writes the report of stored runs again.
"""

from __future__ import annotations

import ast
import glob
import hashlib
import json
import os
import os.path as osp
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import torch
from mmengine.config import Config, DictAction

from hamseg.apis.demo import ensure_data, head_config, set_schedule_length
from hamseg.models import MatrixDecomposition2D
from hamseg.utils.errors import UsageError

from . import stats, tasks

DEMO, LAB = "configs/demo", "projects/context_lab/configs"
MODULE = "projects.context_lab.context_lab.compare"


@dataclass(frozen=True)
class Head:
    """``kind``: 'local' / 'global pooling' (the controls), 'ham' (takes the protocol),
    'random ham' (mmseg's LightHamHead: a new dictionary every forward) or 'context'."""

    label: str
    config: str
    kind: str = "context"
    options: dict[str, Any] = field(default_factory=dict)


R18, MSCAN = "r18-d8_context-shapes.py", "mscan-t_context-shapes.py"
BPTT, C208 = {"model.decode_head.ham_cfg.grad": "bptt"}, {"model.decode_head.ham_channels": 208}
_HEADS = [
    ("fcn", "FCN", f"{DEMO}/fcn_{R18}", "local", {}),
    ("gap", "GAP", f"{DEMO}/psphead-gap_{R18}", "global pooling", {}),
    ("ham-nmf", "HamHead-NMF", f"{DEMO}/hamhead-nmf_{R18}", "ham", {}),
    ("ham-nmf-bptt", "HamHead-NMF BPTT", f"{DEMO}/hamhead-nmf_{R18}", "ham", BPTT),
    ("ham-nmf-208", "HamHead-NMF 208ch", f"{DEMO}/hamhead-nmf_{R18}", "ham", C208),
    ("ham-cd", "HamHead-CD", f"{DEMO}/hamhead-cd_{R18}", "ham", {}),
    ("ham-cd-bptt", "HamHead-CD BPTT", f"{DEMO}/hamhead-cd_{R18}", "ham", BPTT),
    ("ham-vq", "HamHead-VQ", f"{DEMO}/hamhead-vq_{R18}", "ham", {}),
    ("ham-vq-bptt", "HamHead-VQ BPTT", f"{DEMO}/hamhead-vq_{R18}", "ham", BPTT),
    ("nonlocal", "NonLocal", f"{DEMO}/nonlocal_{R18}", "context", {}),
    ("polynl", "PolyNL", f"{LAB}/polynl_{R18}", "context", {}),
    ("attnconv", "AttnConv", f"{LAB}/attnconv_{R18}", "context", {}),
    (
        "segnext-mmseg",
        "SegNeXt-T LightHamHead (mmseg)",
        f"{DEMO}/lighthamhead_{MSCAN}",
        "random ham",
        {},
    ),
    ("segnext", "SegNeXt-T HamLightHead", f"{DEMO}/hamlighthead-nmf_{MSCAN}", "ham", {}),
]
#: ``--heads`` name -> :class:`Head`: the controls, the hams (also BPTT; NMF at FCN's head
#: parameter budget), attention, the lab's heads, SegNeXt-T's two heads.
HEADS = {key: Head(*spec) for key, *spec in _HEADS}
#: The evaluation protocols (docs/evaluation.md): the paper's, hamseg's ensemble.
PROTOCOLS = dict(
    paper=dict(eval_seed=None, eval_draws=1), ensemble=dict(eval_seed=0, eval_draws=12)
)


def parse_variant(spec: Sequence[str]) -> tuple[str, Head]:
    """``NAME BASE KEY=VALUE ...`` -> (NAME, BASE's head with these options; values are Python
    literals where they parse as one)."""
    if len(spec) < 2 or spec[1] not in HEADS:
        bases = ", ".join(HEADS)
        raise UsageError(
            f"--variant {' '.join(spec)}: give NAME BASE KEY=VALUE ..., BASE one of {bases}"
        )
    base = HEADS[spec[1]]
    options = dict(base.options)
    for item in spec[2:]:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--variant {spec[0]}: {item!r} is not KEY=VALUE")
        try:
            options[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            options[key] = value
    return spec[0], Head(spec[0], base.config, base.kind, options)


def run_config(
    key: str,
    head: Head,
    seed: int,
    work_dir: str,
    data_root: Optional[str] = None,
    data_config: Optional[str] = None,
    protocol: str = "paper",
    max_iters: Optional[int] = None,
    curve_interval: int = 100,
    eval_runs: int = 5,
    cfg_options: Optional[dict[str, Any]] = None,
    size: int = 128,
) -> Config:
    """One run's whole config: the head on the data of ``data_config`` (else the demo's Context
    Shapes), options, the protocol (every hamseg ham), schedule, validation every
    ``curve_interval`` iterations, ``seed``, ``work_dir``, and ``lab`` (what the run records)."""
    cfg = head_config(head.config, data_config, data_root)
    cfg.merge_from_dict({**head.options, **(cfg_options or {})})
    if head.kind == "ham":
        cfg.model.decode_head.ham_cfg.update(PROTOCOLS[protocol])
    if max_iters is not None:
        set_schedule_length(cfg, max_iters)
    end = cfg.train_cfg.max_iters
    cfg.train_cfg.val_interval = curve_interval if 0 < curve_interval < end else end
    cfg.default_hooks.checkpoint.update(interval=end, max_keep_ckpts=1)
    cfg.default_hooks.visualization.draw = False
    cfg.update(work_dir=work_dir, randomness=dict(seed=seed), launcher="none")
    bb = cfg.model.backbone
    bb = "MSCAN-T" if bb.type == "MSCAN" else f"{bb.type}-{bb.get('depth', '')}"
    lab = dict(key=key, name=head.label, kind=head.kind, seed=seed, eval_runs=eval_runs)
    cfg.lab = dict(lab, size=size, backbone=bb, max_iters=end)
    return cfg


def machine() -> str:
    """The device that trains here: the GPU's name, else the CPU's, with torch's version."""
    cpu = f"{platform.machine()} CPU ({os.cpu_count()} cores)"
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else cpu
    return f"{name}, torch {torch.__version__}"


def cost(model: torch.nn.Module, size: int) -> dict[str, int]:
    """Parameters and MACs (mmengine's counter, one eval forward of 1x3xSxS) of the model and
    of its decode head."""
    from mmengine.analysis import FlopAnalyzer

    count = lambda m: int(sum(p.numel() for p in m.parameters()))
    model.eval()
    x = torch.zeros(1, 3, size, size, device=next(model.parameters()).device)
    with torch.no_grad():
        flops = FlopAnalyzer(model, (x,)).unsupported_ops_warnings(False)
        flops.uncalled_modules_warnings(False)
        by_module = flops.by_module()
    out = dict(params=count(model), head_params=count(model.decode_head))
    return dict(out, macs=int(by_module[""]), head_macs=int(by_module["decode_head"]))


def learning_curve(work_dir: str) -> list[tuple[int, float]]:
    """(iteration, val mIoU) of the last training log under ``work_dir``."""
    for path in sorted(glob.glob(osp.join(work_dir, "*", "vis_data", "scalars.json")))[::-1]:
        with open(path, encoding="utf-8") as f:
            points = [json.loads(line) for line in f if '"mIoU"' in line]
        if points:
            return [(int(p["step"]), float(p["mIoU"])) for p in points]
    return []


def digest(cfg: Config | str) -> str:
    """A run config's fingerprint (a finished run is reused while it stays the same)."""
    cfg = Config.fromfile(cfg) if isinstance(cfg, str) else cfg
    return hashlib.sha1(json.dumps(cfg.to_dict(), sort_keys=True, default=str).encode()).hexdigest()


def train_and_evaluate(config_path: str) -> dict[str, Any]:
    """Train the run of ``config_path``, evaluate it under both protocols (hamseg hams; 'random
    ham': the paper's only; other heads once) and write ``run.json`` beside it."""
    from mmengine.runner import Runner

    cfg = Config.fromfile(config_path)
    name = f"{cfg.lab.key}_seed{cfg.lab.seed}_{time.time_ns()}"  # unique, also in one process
    cfg.update(experiment_name=name, visualizer=dict(cfg.visualizer, name=name))
    runner = Runner.from_cfg(cfg)
    start = time.perf_counter()
    runner.train()
    train_s = time.perf_counter() - start
    lab, model = cfg.lab, runner.model
    hams = [m for m in model.modules() if isinstance(m, MatrixDecomposition2D)]

    def evaluate(settings: Optional[dict] = None, seed: int = 0) -> float:
        for ham in hams:
            ham.eval_seed, ham.eval_draws = settings["eval_seed"], settings["eval_draws"]
        torch.manual_seed(seed)
        return float(runner.val_loop.run()["mIoU"])

    if lab["kind"] in ("ham", "random ham"):
        ev = dict(paper=[evaluate(PROTOCOLS["paper"], i) for i in range(lab["eval_runs"])])
        if hams:
            ev["ensemble"] = evaluate(PROTOCOLS["ensemble"])
    else:
        ev = dict(deterministic=evaluate())
    if hams:  # MACs of one draw
        evaluate(PROTOCOLS["paper"])
    record = dict(lab, config=digest(config_path), eval=ev, curve=learning_curve(cfg.work_dir))
    record.update(cost(model, lab["size"]), machine=machine(), train_s=round(train_s, 1))
    with open(osp.join(cfg.work_dir, "run.json"), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    return record


def run_all(
    configs: Sequence[Config], jobs: int = 1, force: bool = False, deadline: Optional[float] = None
) -> list[dict]:
    """Every run of ``configs`` (a finished one with the same config is reused), ``jobs`` at a
    time in their own processes, or one after another in this one (``jobs`` = 1); runs not
    started by ``deadline`` (``time.time()``) are left out."""
    records, todo, running = {}, [], []
    for i, cfg in enumerate(configs):
        path = osp.join(cfg.work_dir, "run.json")
        if not force and osp.isfile(path):
            with open(path, encoding="utf-8") as f:
                done = json.load(f)
            if done.get("config") == digest(cfg):
                records[i] = done
                continue
        os.makedirs(cfg.work_dir, exist_ok=True)
        cfg.dump(osp.join(cfg.work_dir, "config.json"))  # JSON: no formatter (seconds a run)
        todo.append(i)

    def wait(limit: int) -> None:  # until fewer than ``limit`` runs are running
        while len(running) >= limit > 0 or (limit == 0 and running):
            for i, proc, log in [r for r in running if r[1].poll() is not None]:
                running.remove((i, proc, log))
                log.close()
                if proc.returncode:
                    raise RuntimeError(f"run failed ({proc.returncode}); see {log.name}")
                with open(osp.join(configs[i].work_dir, "run.json"), encoding="utf-8") as f:
                    records[i] = json.load(f)
            time.sleep(0.5)

    for n, i in enumerate(todo, 1):
        if deadline is not None and time.time() > deadline:
            print(f"deadline: {len(todo) - n + 1} runs not started", flush=True)
            break
        path = osp.join(configs[i].work_dir, "config.json")
        print(f"[{n}/{len(todo)}] {configs[i].work_dir}", flush=True)
        if jobs <= 1:
            records[i] = train_and_evaluate(path)
            continue
        wait(jobs)
        log = open(osp.join(configs[i].work_dir, "run.log"), "w", encoding="utf-8")  # noqa: SIM115
        cmd = [sys.executable, "-m", MODULE, "--run", path]
        running.append((i, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log))
    wait(0)
    return [records[i] for i in sorted(records)]


def final_value(run: dict[str, Any], protocol: str) -> float:
    """A run's val mIoU under ``protocol`` (a head without a ham: its one value)."""
    ev = run["eval"]
    if "deterministic" in ev:
        return float(ev["deterministic"])
    if protocol == "ensemble" and "ensemble" in ev:
        return float(ev["ensemble"])
    return float(statistics.fmean(ev["paper"]))


def summary_rows(runs: Sequence[dict], protocol: str, threshold: float) -> list[dict[str, Any]]:
    """One row per head (first-seen order): values by seed and their statistics; the rank test
    against the best head of its backbone and, for a context head, against the GAP control,
    each only between runs trained on one machine; p-values Holm-adjusted over the table."""
    rows: dict[str, dict[str, Any]] = {}
    for run in sorted(runs, key=lambda r: r["seed"]):
        new = dict(run, values=[], seeds=[], curves=[], others=[], machines=set())
        row = rows.setdefault(run["key"], new)
        row["values"].append(final_value(run, protocol))
        row["seeds"].append(run["seed"])
        row["curves"].append(run.get("curve") or [])
        row["machines"].add(run["machine"])
        if "ensemble" in run["eval"]:
            row["others"].append(final_value(run, "ensemble" if protocol == "paper" else "paper"))
    tests = []
    median = lambda r: statistics.median(r["values"])
    for row in rows.values():
        same = [
            r for r in rows.values() if r["backbone"] == row["backbone"] and len(r["values"]) > 1
        ]
        best = max(same, key=median, default=None)
        gap = next((r for r in same if r["kind"] == "global pooling"), None)
        row["is_best"] = best is row
        context = row["kind"] in ("ham", "context", "random ham")
        for name, ref in (("vs_best", best), ("vs_gap", gap if context else None)):
            if ref is None or ref is row or len(row["values"]) < 2:
                continue
            if ref["machines"] != row["machines"]:
                row[name] = "other machine"
            else:
                tests.append((row, name, stats.rank_test(row["values"], ref["values"])))
    for (row, name, test), p in zip(tests, stats.holm([t.p for *_, t in tests])):
        row[name] = (test, p)
    for row in rows.values():
        row["interval"] = stats.median_interval(row["values"])
        hits = [stats.first_reaching(c, threshold) for c in row["curves"] if c]
        row["iters"] = statistics.median([h or float("inf") for h in hits]) if hits else None
    return list(rows.values())


def _test(cell: Any) -> str:
    if not isinstance(cell, tuple):
        return cell or "-"
    (t, p), iv = cell, cell[0].interval
    return f"p = {t.p:.2g} (Holm {p:.2g}); {t.shift:+.1f} [{iv.low:+.1f}, {iv.high:+.1f}]"


def _cells(r: dict[str, Any], threshold: float) -> list[str]:
    v, iv, iters = r["values"], r["interval"], r["iters"]
    value = f"**{statistics.median(v):.1f}** [{min(v):.1f}, {max(v):.1f}]"
    return [
        r["name"],
        r["backbone"],
        "; ".join(sorted(r["machines"])),
        value if len(v) > 1 else f"{v[0]:.1f} (1 seed)",
        f"[{iv.low:.1f}, {iv.high:.1f}] ({100 * iv.coverage:.1f}%)" if iv else "-",
        f"{sum(x >= threshold for x in v)}/{len(v)}",
        "-" if iters is None else "not reached" if iters == float("inf") else f"{iters:.0f}",
        "best" if r["is_best"] else _test(r.get("vs_best")),
        _test(r.get("vs_gap")),
        f"{statistics.median(r['others']):.1f}" if r["others"] else "-",
        f"{r['params'] / 1e6:.2f} ({r['head_params'] / 1e6:.2f})",
        f"{r['macs'] / 1e9:.3f} ({r['head_macs'] / 1e9:.3f})",
    ]


NOTES = (
    "Protocol: {protocol}; heads without a ham are deterministic. Interval of the median: order "
    "statistics, their exact coverage in brackets. Rank tests: two-sided Mann-Whitney U, exact "
    "(ties by mid-ranks), only between heads of one backbone trained on one machine ('other "
    "machine': unpaired, no test), with the Hodges-Lehmann shift and its interval; p-values "
    "Holm-adjusted over the table's {n} tests. Params and MACs (one forward at the task's size): "
    "the whole model and, in brackets, its decode head."
)


def markdown(rows: Sequence[dict[str, Any]], protocol: str, threshold: float) -> str:
    """The table, the values by seed and how to read them."""
    t, other = f"{threshold:g}", "ensemble" if protocol == "paper" else "paper"
    cols = (
        f"Head|backbone|trained on|val mIoU, median [min, max]|interval of the median|seeds >= {t}"
    )
    cols += f"|iters to {t}|vs best of its backbone|vs GAP|{other}|params M (head)|GMACs (head)"
    lines = [f"| {cols.replace('|', ' | ')} |", "|---" * (cols.count("|") + 1) + "|"]
    lines += ["| " + " | ".join(_cells(r, threshold)) + " |" for r in rows]
    lines += ["", "Per seed:", ""]
    lines += [
        f"- {r['name']}: {', '.join(f'{x:.1f}' for x in r['values'])} (seeds {r['seeds']})"
        for r in rows
    ]
    n = sum(isinstance(r.get(k), tuple) for r in rows for k in ("vs_best", "vs_gap"))
    return "\n".join([*lines, "", NOTES.format(protocol=protocol, n=n)]) + "\n"


def chart(rows: Sequence[dict[str, Any]], path: str, threshold: float) -> None:
    """Per-seed values (dots; the median as a bar) and the median learning curves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.5), dpi=110)
    for i, r in enumerate(rows):
        ax.bar(i, statistics.median(r["values"]), color=f"C{i % 10}", alpha=0.35)
        ax.scatter([i] * len(r["values"]), r["values"], color=f"C{i % 10}", s=12, zorder=3)
        steps = set.intersection(*(set(dict(c)) for c in r["curves"])) if all(r["curves"]) else ()
        med = [statistics.median(dict(c)[s] for c in r["curves"]) for s in sorted(steps)]
        bx.plot(sorted(steps), med, "o-", ms=3, color=f"C{i % 10}", label=r["name"])
    ax.axhline(threshold, color="k", lw=0.6, ls="--")
    ax.set_xticks(range(len(rows)), [r["name"] for r in rows], rotation=35, ha="right", fontsize=8)
    ax.set(ylabel="val mIoU", ylim=(0, 101))
    bx.set(xlabel="iteration", ylabel="val mIoU, median over seeds", ylim=(0, 101))
    bx.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_report(runs: Sequence[dict], out_dir: str, protocol: str, threshold: float, cmd: str):
    """Write ``results.md`` and ``results.png`` into ``out_dir``; returns the markdown."""
    rows = summary_rows(runs, protocol, threshold)
    md = markdown(rows, protocol, threshold) + f"\nCommand: `{cmd}`\n"
    os.makedirs(out_dir, exist_ok=True)
    with open(osp.join(out_dir, "results.md"), "w", encoding="utf-8") as f:
        f.write(md)
    chart(rows, osp.join(out_dir, "results.png"), threshold)
    return md


def task_data(task: str, data_root: Optional[str], dry: bool = False) -> tuple[str, Optional[str]]:
    """(data root, data config) of ``task``, generated if absent; 'shapes' is the demo's data."""
    if task == "shapes":
        root = data_root or "data/context_shapes"
        ensure_data(root, **(dict(size=64, num_train=16, num_val=8) if dry else {}))
        return root, None
    if task not in tasks.TASKS:
        raise UsageError(f"--task {task}: choose one of shapes, {', '.join(tasks.TASKS)}")
    root = data_root or f"data/lab_{task}" + ("_dry" if dry else "")
    if not (data_root and osp.isfile(osp.join(root, "lab_task.json"))):  # yours: as it is
        tasks.generate(root, task, False, **(dict(size=64, num_train=16, num_val=8) if dry else {}))
    return root, f"{LAB}/lab_task.py"


def parser(doc: str) -> Any:
    import argparse

    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--heads", nargs="+", default=["fcn", "gap", "ham-nmf", "nonlocal"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--protocol", default="paper", choices=list(PROTOCOLS))
    p.add_argument("--max-iters", type=int, help="schedule length (default: the config's)")
    p.add_argument("--curve-interval", type=int, default=100, help="validate every N iterations")
    p.add_argument("--eval-runs", type=int, default=5, help="paper-protocol evaluations per run")
    p.add_argument("--threshold", type=float, default=90.0)
    p.add_argument("--jobs", type=int, default=1, help="runs at a time, each in its own process")
    p.add_argument("--cfg-options", nargs="+", action=DictAction, help="for every run")
    p.add_argument("--out-dir", default="work_dirs/compare")
    p.add_argument("--force", action="store_true", help="train runs again that have a run.json")
    return p


def main(argv: Optional[list[str]] = None) -> None:
    if argv is None and sys.argv[1:2] == ["--run"]:  # one run, in its own process
        train_and_evaluate(sys.argv[2])
        return
    p = parser(__doc__)
    p.add_argument("--task", default="shapes", help=f"shapes, {', '.join(tasks.TASKS)}")
    p.add_argument("--variant", nargs="+", action="append", default=[], metavar="NAME BASE K=V")
    p.add_argument("--data-config", help="train on this dataset config's data instead")
    p.add_argument("--data-root", help="the data folder (default: the task's)")
    p.add_argument("--from-runs", help="write the report of this runs.json only")
    args = p.parse_args(argv)
    command = f"python -m {MODULE} " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.from_runs:
        with open(args.from_runs, encoding="utf-8") as f:
            runs = json.load(f)
    else:
        heads = dict(HEADS, **dict(parse_variant(v) for v in args.variant))
        if unknown := [h for h in args.heads if h not in heads]:
            raise UsageError(f"--heads: unknown {', '.join(unknown)}; one of {', '.join(heads)}")
        root, data_config = args.data_root, args.data_config
        if not data_config:
            root, data_config = task_data(args.task, root)
        keys = ("protocol", "max_iters", "curve_interval", "eval_runs", "cfg_options")
        common = {k: getattr(args, k) for k in keys}
        dirs = {
            (k, s): osp.join(args.out_dir, k, f"seed{s}") for k in args.heads for s in args.seeds
        }
        configs = [
            run_config(k, heads[k], s, d, root, data_config, **common) for (k, s), d in dirs.items()
        ]
        runs = run_all(configs, args.jobs, args.force)
        with open(osp.join(args.out_dir, "runs.json"), "w", encoding="utf-8") as f:
            json.dump(runs, f, indent=1)
    print(write_report(runs, args.out_dir, args.protocol, args.threshold, command))


if __name__ == "__main__":
    from hamseg.cli import run_cli

    run_cli(main)
