"""Time one real training iteration of a recipe at full size and report its peak memory.

Usage::

    python tools/benchmark_train_iter.py                        # configs/ham_voc.py, 2 x 513x513
    python tools/benchmark_train_iter.py configs/ham_voc.py --batch-size 2 --size 513 --iters 2

The model of the config is built as tools/train.py builds it for one process (pretrained init
off, SyncBN reverted to BN as mmengine does without a process group), with the config's optimizer
and parameter groups. Each iteration is ``model.train_step`` on a synthetic batch (random uint8
images and labels, 5% ignore pixels): data preprocessing, forward, loss, backward and the SGD
update. Reported: seconds per iteration, peak resident memory of the process (``ru_maxrss``) and
the resident memory before the first iteration, as a table and optionally as JSON (``--out``).
The logic lives in :mod:`hamseg.benchmark.train_iter`.
"""

from __future__ import annotations

import argparse
import json
import os.path as osp
import sys
from collections.abc import Sequence
from typing import Optional

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
import torch  # noqa: E402
from mmengine.logging import MMLogger  # noqa: E402

from hamseg.benchmark.train_iter import benchmark, summary  # noqa: E402
from hamseg.benchmark.training import REPO  # noqa: E402
from hamseg.cli import run_cli  # noqa: E402
from hamseg.compat.package_lookup import config_file  # noqa: E402


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Time one full-size training iteration")
    parser.add_argument("config", nargs="?", default=osp.join(REPO, "configs", "ham_voc.py"))
    parser.add_argument("--batch-size", type=int, help="images per iteration (config's default)")
    parser.add_argument("--size", type=int, default=513, help="square crop size")
    parser.add_argument("--iters", type=int, default=1, help="iterations to time")
    parser.add_argument("--threads", type=int, help="torch intra-op threads")
    parser.add_argument("--out", help="also write the result as JSON here")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    args.config = config_file(args.config)
    # quiet: mmengine logs one line per parameter group option at INFO
    MMLogger.get_instance("benchmark_train_iter", log_level="WARNING")
    if args.threads:
        torch.set_num_threads(args.threads)
    result = benchmark(args.config, args.batch_size, args.size, args.iters)
    print(summary(result))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    run_cli(main)
