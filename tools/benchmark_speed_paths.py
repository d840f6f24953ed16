"""A/B of the Hamburger's speed paths, each on and off, alternating in one run (docs/benchmark.md)::

python tools/benchmark_speed_paths.py [--threads 2] [--runs 7] [--shape 1 512 128 128]
"""

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
import torch  # noqa: E402

from hamseg.cli import run_cli  # noqa: E402
from tools.lab.benchmark.measure import machine  # noqa: E402
from tools.lab.benchmark.speed_paths import speed_paths, speed_paths_markdown  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--shape", type=int, nargs=4, default=[1, 512, 128, 128])
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = speed_paths(tuple(args.shape), args.runs)
    cpu = machine().get("cpu", "CPU")
    head = f"NMF r=64 K=6, input {'x'.join(map(str, args.shape))}, {cpu}, {args.threads} threads, "
    print(speed_paths_markdown(rows, head + f"median of {args.runs} alternating runs"))


if __name__ == "__main__":
    run_cli(main)
