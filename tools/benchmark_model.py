"""One training iteration of whole models side by side: HamNet vs NonLocal (docs/benchmark.md).

python tools/benchmark_model.py --out-dir docs  # configs/ham_voc.py vs NonLocal, 1x3x129x129
python tools/benchmark_model.py --size 257 --iters 5
"""

import argparse
import os
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from mmengine.logging import MMLogger  # noqa: E402

from hamseg.cli import run_cli  # noqa: E402
from hamseg.compat.package_lookup import config_file  # noqa: E402
from tools.lab.benchmark import models  # noqa: E402
from tools.lab.benchmark.measure import select_device, write_report  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add = p.add_argument
    add("--configs", nargs="+", default=[models.HAM, models.NONLOCAL], help="ratios: to the 1st")
    add("--labels", nargs="+", default=None)
    add("--no-aux-variant", action="store_true", help="no 'without auxiliary head' variant")
    add("--size", type=int, default=129)
    add("--batch", type=int, default=1)
    add("--iters", type=int, default=3, help="timed iterations (median, spread)")
    add("--warmup", type=int, default=1)
    add("--device", default="cpu")
    add("--threads", type=int, default=2)
    add("--no-memory", action="store_true")
    add("--out-dir", default="docs")
    add("--name", default="benchmark_model")
    args = p.parse_args(argv)
    for config in args.configs:  # all of them before the first is measured
        config_file(models.resolve(config))
    MMLogger.get_instance("benchmark_model", log_level="WARNING")
    device = select_device(args.device, args.threads)
    os.makedirs(args.out_dir, exist_ok=True)  # fail before measuring, not after
    result = models.run_models(
        args.configs,
        args.labels,
        not args.no_aux_variant,
        size=args.size,
        device=device,
        batch=args.batch,
        iters=args.iters,
        warmup=args.warmup,
        memory=not args.no_memory,
    )
    text = models.model_markdown(result)
    files = write_report(osp.join(args.out_dir, args.name), text, result)
    print(f"{text}\n[benchmark_model] wrote {', '.join(files)}")


if __name__ == "__main__":
    run_cli(main)
