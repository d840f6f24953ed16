"""Evaluate one checkpoint N times and print how much the mIoU moves (mean, std, min, max).

Any mmseg config: mmseg's LightHamHead (a new random NMF dictionary at every forward), HamHead
and HamLightHead with ``eval_seed=None`` (the same), or with a seeded dictionary (std 0)::

    python tools/analysis/eval_variance.py CONFIG CHECKPOINT [--runs 5] [--cfg-options k=v ...]
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from mmengine.config import DictAction  # noqa: E402

from hamseg.analysis.eval_variance import evaluate_repeatedly  # noqa: E402
from hamseg.datasets.checks import check_dataset_paths  # noqa: E402
from hamseg.utils.cli import CLIError, build_config, require_file, run_cli  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("config")
    p.add_argument("checkpoint")
    p.add_argument("--runs", type=int, default=5, help="number of evaluations (default 5)")
    p.add_argument("--metric", default="mIoU")
    p.add_argument("--work-dir", help="where the runner logs (default work_dirs/eval_variance)")
    p.add_argument("--cfg-options", nargs="+", action=DictAction, help="override config keys")
    args = p.parse_args()
    if args.runs < 1:
        raise CLIError(f"--runs must be >= 1, got {args.runs}")
    checkpoint = require_file(args.checkpoint, "checkpoint file")
    cfg = build_config(args.config, args.cfg_options, args.work_dir or "work_dirs/eval_variance")
    check_dataset_paths(cfg, splits=("test",))
    report = evaluate_repeatedly(cfg, checkpoint, args.runs, args.metric)
    print(f"{args.metric} per run: {', '.join(f'{v:.4f}' for v in report.values)}")
    print(report.line())


if __name__ == "__main__":
    run_cli(main)
