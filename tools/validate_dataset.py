"""Scan a whole dataset split for bad samples before a long run; list every problem at once.

Examples:
    python tools/validate_dataset.py configs/ham_voc.py
    python tools/validate_dataset.py configs/ham_context_59.py --split val --workers 2

Checks (see docs/robustness.md): the split's folders and split file exist, the config's
num_classes matches the dataset, and every sample's image and label files are readable and not
corrupt, have the same size, and hold only labels in [0, num_classes) or the ignore index (after
the dataset's reduce_zero_label / label_map). Exit code 0 if the split is clean, 1 if problems
were found, 2 if the dataset or config is missing.
"""

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack, registers hamseg; before mmseg is used)

# isort: split
from mmengine.config import Config, DictAction  # noqa: E402

from hamseg.datasets.checks import DatasetNotFoundError, validate_dataset  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Check every sample of a dataset split")
    parser.add_argument("config", help="config file")
    parser.add_argument("--split", choices=["train", "val", "test"], default="train")
    parser.add_argument("--workers", type=int, default=1, help="processes reading files")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--cfg-options", nargs="+", action=DictAction, help="override config keys: key=value"
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if not osp.isfile(args.config):
        print(f"error: config file not found: {args.config}", file=sys.stderr)
        return 2
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    try:
        report = validate_dataset(
            cfg, args.split, workers=args.workers, progress=not args.no_progress
        )
    except (DatasetNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for problem in report.problems:
        print(problem)
    print(report.summary())
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
