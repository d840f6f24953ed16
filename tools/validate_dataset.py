"""Scan a dataset for bad samples before a long run; list every problem at once.

Examples:
    python tools/validate_dataset.py configs/ham_voc.py              # every split it defines
    python tools/validate_dataset.py configs/ham_context_59.py --split val --workers 2
    python tools/validate_dataset.py MY_CONFIG --cfg-options data_root=PATH   # moves every split

Checks (see docs/robustness.md), for every split the config defines a dataloader for (train,
val, test; ``--split`` restricts them; a split with the same datasets as an earlier one is not
read twice): the folders and split files exist, the config's num_classes matches the dataset,
and every sample's image and label files are readable and not corrupt, have the same size, and
hold only labels in [0, num_classes) or the ignore index (after the dataset's reduce_zero_label
/ label_map). The config is read as tools/train.py reads it (``--cfg-options data_root=PATH``
moves every dataset that used the config's data_root). Exit code 0 if every split is clean, 1 if
problems were found, 2 if the dataset or config is missing (one line).
"""

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack, registers hamseg; before mmseg is used)

# isort: split
from mmengine.config import DictAction  # noqa: E402

from hamseg.cli import build_config, run_cli  # noqa: E402
from hamseg.datasets.checks import SPLITS, validate_splits  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Check every sample of a config's datasets")
    parser.add_argument("config", help="config file")
    parser.add_argument(
        "--split",
        nargs="+",
        choices=SPLITS,
        default=None,
        help="only these splits (default: every split the config defines)",
    )
    parser.add_argument("--workers", type=int, default=1, help="processes reading files")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--cfg-options", nargs="+", action=DictAction, help="override config keys: key=value"
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    cfg = build_config(args.config, args.cfg_options)
    reports = validate_splits(cfg, args.split, workers=args.workers, progress=not args.no_progress)
    for report in reports:
        for problem in report.problems:
            print(problem)
        print(report.summary())
    return 1 if any(report.problems for report in reports) else 0


if __name__ == "__main__":
    run_cli(lambda: sys.exit(main()))
