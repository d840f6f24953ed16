"""SegNeXt-T's Hamburger head: hamseg's HamLightHead vs mmseg's LightHamHead (training mode).

Forward + backward time and peak memory of the ham alone, of the decode head and of one
whole-model iteration at the recipe's crop, measured side by side (hamseg/benchmark/segnext.py)::

    python tools/benchmark_segnext.py [--batch 2] [--size 512] [--runs 5] [--out FILE.md]
        [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack, registers hamseg; before mmseg is used)

# isort: split
import torch  # noqa: E402

from hamseg.benchmark.outputs import write_report  # noqa: E402
from hamseg.benchmark.segnext import compare, markdown  # noqa: E402
from hamseg.cli import CLIError, run_cli  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--size", type=int, default=512, help="crop size (a multiple of 32)")
    p.add_argument("--runs", type=int, default=5, help="timed runs per side")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--out", help="also write the table to this markdown file")
    p.add_argument("--out-dir", help="also write segnext.md and segnext.json (every number) here")
    args = p.parse_args()
    if args.size % 32 or args.size < 64:
        raise CLIError(f"--size must be a multiple of 32 and >= 64, got {args.size}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise CLIError(f"--device {args.device}: CUDA is not available on this machine")
    result = compare(args.batch, args.size, args.runs, device=args.device)
    table = markdown(result)
    print(table)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(table + "\n")
    if args.out_dir:
        write_report(osp.join(args.out_dir, "segnext"), table + "\n", result)


if __name__ == "__main__":
    run_cli(main)
