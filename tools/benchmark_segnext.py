"""SegNeXt-T's HamLightHead vs mmseg's LightHamHead, training mode (docs/benchmark.md)::

python tools/benchmark_segnext.py [--batch 2] [--size 512] [--runs 5] [--device cpu|cuda]
"""

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack, registers hamseg; before mmseg is used)

# isort: split
import torch  # noqa: E402

from hamseg.cli import CLIError, run_cli  # noqa: E402
from tools.lab.benchmark.measure import select_device, write_report  # noqa: E402
from tools.lab.benchmark.models import compare_segnext, segnext_markdown  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add = p.add_argument
    add("--batch", type=int, default=2)
    add("--size", type=int, default=512, help="crop size (a multiple of 32)")
    add("--runs", type=int, default=5, help="timed runs per side")
    add("--device", default="cpu", help="cpu or cuda")
    add("--out", help="also write the table to this markdown file")
    add("--out-dir", help="also write segnext.md and segnext.json (every number) here")
    args = p.parse_args()
    if args.size % 32 or args.size < 64:
        raise CLIError(f"--size must be a multiple of 32 and >= 64, got {args.size}")
    device = select_device(args.device, torch.get_num_threads())
    result = compare_segnext(args.batch, args.size, args.runs, device=device)
    table = segnext_markdown(result) + "\n"
    print(table, end="")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(table)
    if args.out_dir:
        write_report(osp.join(args.out_dir, "segnext"), table, result)


if __name__ == "__main__":
    run_cli(main)
