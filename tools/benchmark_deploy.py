"""CPU latency at equal threads, PyTorch eager vs ONNX Runtime fp32/fp16/int8 (dynamic, static),
with argmax agreement and val mIoU, of the demo model and SegNeXt-T; docs/deploy.md records one::

    python tools/benchmark_deploy.py [--demo-checkpoint C] [--segnext-checkpoint C] [--runs 10]
        [--threads 1 2] [--out FILE.md] [--out-dir DIR]
"""

import argparse
import os
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack, registers hamseg; before mmseg is used)

# isort: split
from hamseg.apis.export import require_deploy  # noqa: E402
from hamseg.benchmark.deploy import DEMO, SEGNEXT, latency  # noqa: E402
from hamseg.benchmark.measure import write_report  # noqa: E402
from hamseg.cli import run_cli  # noqa: E402


def markdown(label: str, rows: list[dict]) -> str:
    """Rows of one model: backend | per thread count: median ms (min-max), ratio | agreement,
    worst image, val mIoU."""
    threads = sorted({r["threads"] for r in rows})
    by = {(r["backend"], r["threads"]): r for r in rows}
    lines = []
    for backend in dict.fromkeys(r["backend"] for r in rows):
        cells = [
            f"{r['ms']:.1f} ({r['min_ms']:.1f}-{r['max_ms']:.1f}) | **{r['ratio']:.2f}x**"
            for r in (by[backend, n] for n in threads)
        ]
        r = by[backend, threads[0]]
        quality = f"{100 * r['agreement']:.2f}% ({100 * r['worst']:.2f}%) | {r['miou']:.2f}"
        lines.append(f"| {label} {r['size']} | {backend} | {' | '.join(cells)} | {quality} |")
    head = " | ".join(f"ms, {n} thr (min-max) | / eager" for n in threads)
    return "\n".join(
        [
            f"| model | backend | {head} | agreement (worst image) | val mIoU |",
            "| --- " * (4 + 2 * len(threads)) + "|",
            *lines,
        ]
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add = p.add_argument
    add("--demo-checkpoint", help="trained demo HamHead-NMF (tools/run_demo.py); else random")
    add("--segnext-checkpoint", help="trained demo HamLightHead (SegNeXt-T); else random")
    add("--runs", type=int, default=10)
    add("--threads", type=int, nargs="+", default=[1, os.cpu_count()], help="torch and ORT")
    add("--val-images", type=int, default=0, help="val images for agreement/mIoU (0: all)")
    add("--out", help="also write the table to this markdown file")
    add("--out-dir", help="also write deploy.md and deploy.json (every number) here")
    args = p.parse_args()
    require_deploy()
    cases = [
        ("demo HamHead-NMF", DEMO, 128, args.demo_checkpoint),
        ("SegNeXt-T (HamLightHead)", SEGNEXT, 512, args.segnext_checkpoint),
    ]
    tables, rows = [], {}
    for label, config, size, ckpt in cases:
        rows[label] = latency(config, size, ckpt, args.threads, args.runs, args.val_images)
        tables.append(markdown(label, rows[label]))
        print(tables[-1], flush=True)
    table = "\n".join([tables[0], *(t.split("\n", 2)[2] for t in tables[1:])]) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(table)
    if args.out_dir:
        write_report(osp.join(args.out_dir, "deploy"), table, dict(rows=rows, device="cpu"))


if __name__ == "__main__":
    run_cli(main)
