"""Cost of global-context modules measured side by side: the paper's Table 3 on your machine.

Geng et al., "Is Attention Better Than Matrix Decomposition?" (ICLR 2021), Sec. 3.3, Table 3,
App. E.2: parameters, MACs, memory and time of context modules on one 1x512x128x128 tensor.

Usage::

    # Table 3 on this machine (default shape 1x512x128x128, CPU, 2 threads)
    python tools/benchmark_context.py --out-dir docs
    # on a shared machine: wait for quiet windows, repeat disturbed timings
    python tools/benchmark_context.py --out-dir docs --max-wait 600 --retries 3
    # a subset, another device
    python tools/benchmark_context.py --modules ham_nmf mmseg_ham sa --device cuda
    # scaling: time and memory against n = H*W, H = W from 32 to 256 (log-log)
    python tools/benchmark_context.py --sweep --out-dir docs

What is measured, per module, in one process and one run (details: docs/benchmark.md and
:mod:`hamseg.benchmark.measure`): params (the paper's "M" is 2**20); MACs counted by mmengine's
``FlopAnalyzer`` in eval mode, for the Hamburger rows next to a hand count; the median time of
inference (eval, no grad) and of forward+backward (train, ``out.backward(g)``) over ``--runs``
runs after ``--warmup`` (at most ``--budget`` seconds once 3 runs are done; on CUDA timed with
CUDA events); the compute floor of each (counted FLOPs over the fastest fp32 matmul rate measured
on a ``--rate-size``^3 product at the start, before every module and at the end); peak memory of
one call (CUDA: the allocator's peak; CPU: the allocator's events under ``torch.profiler``).

Interference: the load average and the CPU *other* processes used during every timing are
recorded, and every timing is bracketed by a quick matmul probe whose speed (over the fastest
seen) is reported: other tenants of a virtual machine slow it down without showing in
/proc/stat. ``--max-wait S`` waits up to S seconds for others to go under ``--quiet-cpu`` cores
before each timing; ``--retries R`` (default 2) repeats a timing that others disturbed or that
ran below ``--slow`` (0.85) of the best speed, keeping the least disturbed attempt.
"""

from __future__ import annotations

import argparse
import os
import os.path as osp
import sys
from typing import Optional

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)
from hamseg.benchmark import PAPER_SHAPE, SPECS, Settings, run_sweep, run_table  # noqa: E402
from hamseg.benchmark.machine import select_device  # noqa: E402
from hamseg.benchmark.outputs import write_report  # noqa: E402
from hamseg.benchmark.report import markdown, plot  # noqa: E402
from hamseg.benchmark.sweep import sweep_markdown, sweep_plot  # noqa: E402
from hamseg.cli import run_cli  # noqa: E402


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--shape",
        type=int,
        nargs=4,
        default=list(PAPER_SHAPE),
        metavar=("B", "C", "H", "W"),
        help="input shape (sweep: only B and C used)",
    )
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (CPU)")
    p.add_argument("--rank", type=int, default=64, help="r of the hams, bases of EMA")
    p.add_argument("--steps", type=int, default=6, help="K of the hams")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument(
        "--budget",
        type=float,
        default=60.0,
        help="seconds per measurement after which it stops (>= 3 runs)",
    )
    p.add_argument("--rate-size", type=int, default=2048, help="side of the matmul for the rate")
    p.add_argument(
        "--quiet-cpu",
        type=float,
        default=0.3,
        help="cores other processes may use for a timing to count as undisturbed",
    )
    p.add_argument(
        "--max-wait",
        type=float,
        default=0.0,
        help="seconds to wait, before each timing, for other processes to go under --quiet-cpu",
    )
    p.add_argument(
        "--retries", type=int, default=2, help="timings repeated while they were disturbed"
    )
    p.add_argument(
        "--slow",
        type=float,
        default=0.85,
        help="a timing is disturbed if the machine ran below this fraction of its best speed",
    )
    p.add_argument("--modules", nargs="+", choices=list(SPECS), default=None)
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory runs")
    p.add_argument("--out-dir", default="docs")
    p.add_argument(
        "--name", default=None, help="basename of the outputs (benchmark_context / benchmark_sweep)"
    )
    p.add_argument("--sweep", action="store_true", help="time and memory against n = H*W")
    p.add_argument("--sizes", type=int, nargs="+", default=[32, 45, 64, 91, 128, 181, 256])
    p.add_argument(
        "--max-pairwise-gb",
        type=float,
        default=8.0,
        help="sweep: skip quadratic modules whose n^2 maps need more",
    )
    return p.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> None:
    args = parse_args(argv)
    device = select_device(args.device, args.threads)
    os.makedirs(args.out_dir, exist_ok=True)  # fail before measuring, not after
    st = Settings(
        tuple(args.shape),
        device,
        args.rank,
        args.steps,
        args.runs,
        args.warmup,
        args.budget,
        memory=not args.no_memory,
        quiet=args.quiet_cpu,
        max_wait=args.max_wait,
        retries=args.retries,
        slow=args.slow,
    )
    if args.sweep:
        result = run_sweep(st, args.sizes, args.modules, args.max_pairwise_gb, args.rate_size)
        base = osp.join(args.out_dir, args.name or "benchmark_sweep")
        text = sweep_markdown(result)
        files = write_report(base, text, result, sweep_plot)
    else:
        result = run_table(st, args.modules, args.rate_size)
        base = osp.join(args.out_dir, args.name or "benchmark_context")
        text = markdown(result)
        files = write_report(base, text, result, plot)
    print(text)
    print(f"[benchmark] wrote {', '.join(files)}")


if __name__ == "__main__":
    run_cli(main)
