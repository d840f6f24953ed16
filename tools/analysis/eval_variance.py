"""How much one checkpoint's mIoU depends on the ham's random dictionary (any mmseg config).

    python tools/analysis/eval_variance.py CONFIG CKPT --seeds 0 1 2 3 4 --draws 1 12 --runs 10
    python tools/analysis/eval_variance.py CONFIG CKPT --runs 5     # random evaluations only

--seeds: one timed evaluation per eval_seed and ensemble size K (--draws, default the config's
eval_draws); --runs: evaluations with new dictionaries at every forward (eval_seed=None, one
draw, as mmseg's LightHamHead). docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from mmengine.config import DictAction  # noqa: E402

from hamseg.analysis.eval_variance import (  # noqa: E402  # noqa: E402
    Evaluation,
    evaluate_repeatedly,
    hams,
    seed_sweep,
    set_eval_draws,
)
from hamseg.cli import CLIError, build_config, run_cli  # noqa: E402
from hamseg.datasets.checks import check_dataset_paths  # noqa: E402
from hamseg.utils.errors import require_file  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("config")
    p.add_argument("checkpoint")
    p.add_argument("--seeds", type=int, nargs="+", default=[], help="eval_seed values to sweep")
    p.add_argument("--draws", type=int, nargs="+", help="eval_draws values K of the sweep")
    p.add_argument("--runs", type=int, default=5, help="random evaluations (default 5; 0: none)")
    p.add_argument("--metric", default="mIoU")
    p.add_argument("--work-dir", help="where the runner logs (default work_dirs/eval_variance)")
    p.add_argument("--cfg-options", nargs="+", action=DictAction, help="override config keys")
    args = p.parse_args()
    if args.runs < 0 or (args.runs == 0 and not args.seeds):
        raise CLIError(f"--runs must be >= 1 without --seeds, got {args.runs}")
    if any(k < 1 for k in args.draws or ()):
        raise CLIError(f"--draws must be >= 1, got {args.draws}")
    checkpoint = require_file(args.checkpoint, "checkpoint file")
    cfg = build_config(args.config, args.cfg_options, args.work_dir or "work_dirs/eval_variance")
    check_dataset_paths(cfg, splits=("test",))
    evaluation = Evaluation(cfg, checkpoint, args.metric)
    found = hams(evaluation.model)
    if args.seeds and not found:
        raise CLIError("--seeds: the model has no hamseg ham (NMF, CD, VQ); use --runs")
    if args.seeds:
        rows = seed_sweep(evaluation, args.seeds, args.draws or [found[0].eval_draws])
        print(f"{args.metric} per eval_seed ({', '.join(map(str, args.seeds))}):")
        for row in rows:
            print(
                f"  eval_draws={row.draws}: {', '.join(f'{v:.2f}' for v in row.values)}  "
                f"range {row.range:.2f}, std {row.std:.2f}, {row.median_seconds:.2f} s per "
                f"evaluation ({row.median_seconds / rows[0].median_seconds:.2f}x)"
            )
    if args.runs:
        if found:  # mmseg's behaviour: a new dictionary at every forward, one draw
            set_eval_draws(evaluation.model, None, 1)
        report = evaluate_repeatedly(evaluation, args.runs)
        print(f"{args.metric} per run: {', '.join(f'{v:.4f}' for v in report.values)}")
        print(report.line())


if __name__ == "__main__":
    run_cli(main)
