"""Scan every sample of a config's datasets before a long run; list every problem at once.

    python tools/validate_dataset.py configs/ham_voc.py              # every split it defines
    python tools/validate_dataset.py configs/ham_context_59.py --split val --workers 2
    python tools/validate_dataset.py MY_CONFIG --cfg-options data_root=PATH   # moves every split
    python tools/validate_dataset.py MY_CONFIG --write-splits --val-fraction 0.2   # flat layout

Folders, split files and class counts first, then each image and label: readable, complete, the
same size, label values in [0, num_classes) or the ignore index (docs/custom_dataset.md). Exit
code 0: clean, 1: problems found (one line each), 2: the config or dataset is missing or wrong
(one line). ``--write-splits`` first writes the train/val split files of a flat layout (the
custom template with split_dir set); it never replaces a split file.
"""

import argparse
import sys

from mmengine.config import DictAction

from hamseg.cli import CLIError, build_config, run_cli
from hamseg.datasets.checks import validate_splits
from hamseg.datasets.splits import write_split_files


def main() -> int:
    parser = argparse.ArgumentParser(description="Check every sample of a config's datasets")
    parser.add_argument("config", help="config file")
    parser.add_argument("--split", nargs="+", choices=("train", "val", "test"), help="only these")
    parser.add_argument("--workers", type=int, default=1, help="processes reading files")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--cfg-options", nargs="+", action=DictAction, help="key=value overrides")
    parser.add_argument(
        "--write-splits",
        action="store_true",
        help="first write the train/val split files of a flat layout (never over existing ones)",
    )
    parser.add_argument("--val-fraction", type=float, help="with --write-splits (default 0.2)")
    parser.add_argument("--seed", type=int, default=0, help="with --write-splits: shuffle seed")
    args = parser.parse_args()
    if args.val_fraction is not None and not args.write_splits:
        raise CLIError("--val-fraction is an option of --write-splits: add --write-splits")
    cfg = build_config(args.config, args.cfg_options)
    if args.write_splits:
        fraction = 0.2 if args.val_fraction is None else args.val_fraction
        print(write_split_files(cfg, fraction, args.seed))
    reports = validate_splits(cfg, args.split, workers=args.workers, progress=not args.no_progress)
    for report in reports:
        print(*report.problems, report.summary(), sep="\n")
    return 1 if any(report.problems for report in reports) else 0


if __name__ == "__main__":
    run_cli(lambda: sys.exit(main()))
