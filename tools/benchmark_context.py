"""Cost of context modules side by side: the paper's Table 3 on this machine (docs/benchmark.md).

python tools/benchmark_context.py --out-dir docs  # 1x512x128x128, CPU, 2 threads, all rows
python tools/benchmark_context.py --modules ham_nmf mmseg_ham sa --device cuda
python tools/benchmark_context.py --sweep --runs 3 --out-dir docs  # against n = H*W
"""

import argparse
import os
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)
from hamseg.cli import run_cli  # noqa: E402
from tools.lab.benchmark import context  # noqa: E402
from tools.lab.benchmark.measure import select_device, write_report  # noqa: E402
from tools.lab.benchmark.zoo import PAPER_SHAPE, SPECS  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add = p.add_argument
    add("--shape", type=int, nargs=4, default=list(PAPER_SHAPE), metavar=("B", "C", "H", "W"))
    add("--device", default="cpu", help="cpu, cuda, cuda:1 (CUDA: timed with CUDA events)")
    add("--threads", type=int, default=2, help="torch.set_num_threads (CPU)")
    add("--rank", type=int, default=64, help="r of the hams, bases of EMA")
    add("--steps", type=int, default=6, help="K of the hams")
    add("--runs", type=int, default=7, help="timed runs per module, in turn (median, spread)")
    add("--warmup", type=int, default=1)
    add("--rate-size", type=int, default=2048, help="side of the matmul setting the floors")
    add("--modules", nargs="+", choices=list(SPECS), default=None)
    add("--no-memory", action="store_true", help="skip the peak-memory runs")
    add("--out-dir", default="docs")
    add("--name", help="basename of the outputs (benchmark_context / benchmark_sweep)")
    add("--sweep", action="store_true", help="time and memory against n = H*W (B, C of --shape)")
    add("--sizes", type=int, nargs="+", default=[32, 45, 64, 91, 128, 181, 256])
    add("--max-pairwise-gb", type=float, default=8.0, help="sweep: skip larger n^2 maps")
    args = p.parse_args(argv)
    device = select_device(args.device, args.threads)
    os.makedirs(args.out_dir, exist_ok=True)  # fail before measuring, not after
    st = context.Settings(
        tuple(args.shape),
        device,
        args.rank,
        args.steps,
        args.runs,
        args.warmup,
        memory=not args.no_memory,
    )
    if args.sweep:
        result = context.run_sweep(st, args.sizes, args.modules, args.max_pairwise_gb)
        text = context.sweep_markdown(result)
        plot = context.sweep_plot
        name = "benchmark_sweep"
    else:
        result = context.run_table(st, args.modules, args.rate_size)
        text = context.markdown(result)
        plot = context.plot
        name = "benchmark_context"
    files = write_report(osp.join(args.out_dir, args.name or name), text, result, plot)
    print(f"{text}\n[benchmark] wrote {', '.join(files)}")


if __name__ == "__main__":
    run_cli(main)
