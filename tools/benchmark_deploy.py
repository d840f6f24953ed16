"""CPU latency at equal threads, PyTorch eager vs ONNX Runtime fp32/fp16/int8/int8-dynamic, with
argmax agreement and val mIoU, ORT's per-operator profile of fp32 and int8, and the eval_draws
trade-off; docs/deploy.md records one::

    python tools/benchmark_deploy.py [--models demo segnext hamnet] [--demo-checkpoint C]
        [--segnext-checkpoint C] [--runs 10] [--threads 1 2] [--backends ...]
        [--profile-runs 3] [--draws 1 4 12] [--draw-seeds 10] [--recipes NAME ...]
        [--out FILE.md] [--out-dir DIR]

hamnet (configs/ham_voc.py's network at 513x513) runs with random weights and has no val split
here: latency and profile only.
"""

import argparse
import os
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack, registers hamseg; before mmseg is used)

# isort: split
from hamseg.apis.export import require_deploy  # noqa: E402
from hamseg.cli import run_cli  # noqa: E402
from tools.lab.benchmark.deploy import (  # noqa: E402
    BACKENDS,
    CASES,
    RECIPES,
    draws_table,
    environment,
    latency,
    recipe_table,
)
from tools.lab.benchmark.measure import write_report  # noqa: E402


def _times(v: object) -> str:
    return "n/a" if v is None else f"{v:.2f}x"


def _pct(v: object) -> str:
    return "n/a" if v is None else f"{100 * v:.2f}%"


def markdown(label: str, rows: list[dict]) -> str:
    """Rows of one model: backend | per thread count: median ms (min-max), ratio to eager and
    to ORT fp32 | agreement, worst image, val mIoU (n/a without a val split)."""
    threads = sorted({r["threads"] for r in rows})
    by = {(r["backend"], r["threads"]): r for r in rows}
    lines = []
    for backend in dict.fromkeys(r["backend"] for r in rows):
        cells = [
            f"{r['ms']:.1f} ({r['min_ms']:.1f}-{r['max_ms']:.1f}) | {_times(r['ratio'])} | "
            f"{r['ratio_ort']:.2f}x | {r['cpu_ms']:.1f} | **{r['cpu_ratio_ort']:.2f}x**"
            for r in (by[backend, n] for n in threads)
        ]
        r = by[backend, threads[0]]
        miou = "n/a" if r["miou"] is None else f"{r['miou']:.2f}"
        quality = f"{_pct(r['agreement'])} ({_pct(r['worst'])}) | {miou}"
        lines.append(f"| {label} {r['size']} | {backend} | {' | '.join(cells)} | {quality} |")
    head = " | ".join(
        f"ms, {n} thr (min-max) | / eager | / ORT fp32 | CPU ms | CPU / ORT fp32" for n in threads
    )
    return "\n".join(
        [
            f"| model | backend | {head} | agreement (worst image) | val mIoU |",
            "| --- " * (4 + 5 * len(threads)) + "|",
            *lines,
        ]
    )


def profile_markdown(label: str, profiles: dict[str, list[dict]], top: int = 8) -> str:
    """The ``top`` operator types of each profiled graph (ms: each node's fastest run, summed;
    nodes; share)."""
    head = f"| {label} | operator | ms (each node's fastest run) | nodes | share |"
    lines = [head, "| --- " * 5 + "|"]
    for graph, ops in profiles.items():
        total = sum(o["ms"] for o in ops)
        lines.append(
            f"| ORT {graph} | all kernels | {total:.1f} | {sum(o['nodes'] for o in ops)} | 100% |"
        )
        lines += [
            f"| | {o['op']} | {o['ms']:.1f} | {o['nodes']} | {100 * o['share']:.1f}% |"
            for o in ops[:top]
        ]
    return "\n".join(lines)


def draws_markdown(label: str, rows: list[dict]) -> str:
    """eval_draws -> ORT fp32/int8 ms and val mIoU (the graph's seed; over seeds in PyTorch)."""
    r0 = rows[0]
    lines = [
        f"| {label} {r0['size']} | ORT fp32 ms, {r0['threads']} thr (min-max), CPU ms | ORT "
        f"int8 ms (min-max), CPU ms | val mIoU, fp32 graph (eval_seed 0) | int8 graph | "
        f"PyTorch, eval_seed 0-{r0['seeds'] - 1}: mean (min-max) |",
        "| --- " * 6 + "|",
    ]
    for r in rows:
        time = (
            f"{r[f'{p}_ms']:.1f} ({r[f'{p}_min_ms']:.1f}-{r[f'{p}_max_ms']:.1f}), "
            f"{r[f'{p}_cpu_ms']:.1f}"
            for p in ("fp32", "int8")
        )
        lines.append(
            f"| eval_draws={r['draws']} | {' | '.join(time)} | {r['miou']:.2f} | "
            f"{r['miou_int8']:.2f} | {r['miou_mean']:.2f} ({r['miou_min']:.2f}-"
            f"{r['miou_max']:.2f}) |"
        )
    return "\n".join(lines)


def recipes_markdown(label: str, rows: list[dict]) -> str:
    """int8 recipe -> ms, CPU ms and their ratios to ORT fp32, agreement, val mIoU."""
    r0 = rows[0]
    lines = [
        f"| {label} {r0['size']}, {r0['threads']} thr | ms (min-max) | / ORT fp32 | CPU ms | "
        "CPU / ORT fp32 | agreement (worst image) | val mIoU |",
        "| --- " * 7 + "|",
    ]
    for r in rows:
        miou = "n/a" if r["miou"] is None else f"{r['miou']:.2f}"
        lines.append(
            f"| {r['recipe']} | {r['ms']:.1f} ({r['min_ms']:.1f}-{r['max_ms']:.1f}) | "
            f"{r['ratio_ort']:.2f}x | {r['cpu_ms']:.1f} | **{r['cpu_ratio_ort']:.2f}x** | "
            f"{_pct(r['agreement'])} ({_pct(r['worst'])}) | {miou} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add = p.add_argument
    add("--models", nargs="+", choices=list(CASES), default=["demo", "segnext"])
    add("--demo-checkpoint", help="trained demo HamHead-NMF (tools/run_demo.py); else random")
    add("--segnext-checkpoint", help="trained demo HamLightHead (SegNeXt-T); else random")
    add("--runs", type=int, default=10)
    add("--threads", type=int, nargs="+", default=[1, os.cpu_count()], help="torch and ORT")
    add("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    add("--val-images", type=int, default=0, help="val images for agreement/mIoU (0: all)")
    add("--profile-runs", type=int, default=0, help="ORT's per-op profile of fp32 and int8")
    add("--draws", type=int, nargs="*", default=[], help="eval_draws table (demo, segnext)")
    add("--draw-seeds", type=int, default=10, help="eval_seeds per draws row (PyTorch)")
    add("--recipes", nargs="*", choices=list(RECIPES), default=[], help="int8 variants table")
    add("--out", help="also write the tables to this markdown file")
    add("--out-dir", help="also write deploy.md and deploy.json (every number) here")
    args = p.parse_args()
    require_deploy()
    checkpoints = dict(demo=args.demo_checkpoint, segnext=args.segnext_checkpoint)
    tables = []
    extra = []
    result = dict(rows={}, profiles={}, draws={}, recipes={})
    for name in args.models:
        label, config, size, quality = CASES[name]
        measured = latency(
            config,
            size,
            checkpoints.get(name),
            args.threads,
            args.runs,
            args.val_images,
            args.backends,
            quality,
            args.profile_runs,
        )
        result["rows"][label] = measured["rows"]
        result["profiles"][label] = measured["profiles"]
        tables.append(markdown(label, measured["rows"]))
        print(tables[-1], flush=True)
        if measured["profiles"]:
            extra.append(profile_markdown(label, measured["profiles"]))
            print(extra[-1], flush=True)
        if args.draws and quality:
            rows = draws_table(
                config,
                size,
                checkpoints.get(name),
                args.draws,
                args.draw_seeds,
                args.threads[0],
                args.runs,
                args.val_images,
            )
            result["draws"][label] = rows
            extra.append(draws_markdown(label, rows))
            print(extra[-1], flush=True)
        if args.recipes:
            rows = recipe_table(
                config,
                size,
                checkpoints.get(name),
                args.recipes,
                args.threads[0],
                args.runs,
                args.val_images,
                quality,
            )
            result["recipes"][label] = rows
            extra.append(recipes_markdown(label, rows))
            print(extra[-1], flush=True)
    result["environment"] = environment()
    text = "\n".join([tables[0], *(t.split("\n", 2)[2] for t in tables[1:])]) + "\n"
    text += "".join(f"\n{t}\n" for t in extra)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    if args.out_dir:
        write_report(osp.join(args.out_dir, "deploy"), text, result)


if __name__ == "__main__":
    run_cli(main)
