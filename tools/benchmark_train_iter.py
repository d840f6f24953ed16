"""Full-size training iterations of a recipe: seconds, the decode head's share, loss, peak memory
(docs/recipes.md, docs/gpu.md)::

python tools/benchmark_train_iter.py [configs/ham_voc.py] [--batch-size 2] [--size 513]
    [--device cuda] [--precision fp32|fp16|bf16] [--iters 10]
"""

import argparse
import json
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
import torch  # noqa: E402
from mmengine.logging import MMLogger  # noqa: E402

from hamseg.cli import run_cli  # noqa: E402
from hamseg.compat.package_lookup import config_file  # noqa: E402
from tools.lab.benchmark.models import REPO, train_iter, train_iter_summary  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add = p.add_argument
    add("config", nargs="?", default=osp.join(REPO, "configs", "ham_voc.py"))
    add("--batch-size", type=int, help="images per iteration (config's default)")
    add("--size", type=int, default=513, help="square crop size")
    add("--iters", type=int, default=1, help="iterations to time")
    add("--threads", type=int, help="torch intra-op threads")
    add("--device", default="cpu", help="cpu or cuda")
    add("--precision", choices=("fp32", "fp16", "bf16"), default="fp32", help="autocast dtype")
    add("--out", help="also write the result as JSON here")
    args = p.parse_args(argv)
    config = config_file(args.config)
    MMLogger.get_instance("benchmark_train_iter", log_level="WARNING")  # not every param group
    if args.threads:
        torch.set_num_threads(args.threads)
    result = train_iter(config, args.batch_size, args.size, args.iters, args.device, args.precision)
    print(train_iter_summary(result))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    run_cli(main)
