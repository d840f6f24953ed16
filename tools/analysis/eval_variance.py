"""A checkpoint's mIoU under the evaluation protocols of a random-init ham (any mmseg config).

    python tools/analysis/eval_variance.py CONFIG CKPT --runs 5 --tta        # the paper's protocol
    python tools/analysis/eval_variance.py CONFIG CKPT --runs 5 --ensemble   # and hamseg's ensemble
    python tools/analysis/eval_variance.py CONFIG CKPT --seeds 0 1 2 3 4 --draws 1 12 --runs 0

--runs N: the paper's protocol (eval_seed=None, eval_draws=1: a new dictionary for every image at
every forward, as the release and mmseg's LightHamHead), N test runs, run i after
torch.manual_seed(--seed + i): the mean with its 95% interval and the std. --ensemble: one run
of hamseg's deterministic ensemble (eval_seed=0, eval_draws=12) and its difference to that mean.
--seeds: one timed evaluation per eval_seed and ensemble size K (--draws, default the config's
eval_draws). --tta: every run with the config's test-time augmentation (tools/test.py --tta).
docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from mmengine.config import DictAction  # noqa: E402

from hamseg.cli import CLIError, build_config, run_cli  # noqa: E402
from hamseg.datasets.checks import check_dataset_paths  # noqa: E402
from hamseg.engine.tta import use_tta  # noqa: E402
from hamseg.utils.errors import require_file  # noqa: E402
from tools.lab.analysis.eval_variance import (  # noqa: E402
    Evaluation,
    evaluate_repeatedly,
    hams,
    seed_sweep,
    set_protocol,
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("config")
    p.add_argument("checkpoint")
    p.add_argument("--seeds", type=int, nargs="+", default=[], help="eval_seed values to sweep")
    p.add_argument("--draws", type=int, nargs="+", help="eval_draws values K of the sweep")
    p.add_argument("--runs", type=int, default=5, help="runs of the paper's protocol (0: none)")
    p.add_argument("--seed", type=int, default=0, help="run i draws after manual_seed(seed + i)")
    p.add_argument("--ensemble", action="store_true", help="also one run of hamseg's ensemble")
    p.add_argument("--tta", action="store_true", help="the config's test-time augmentation")
    p.add_argument("--metric", default="mIoU")
    p.add_argument("--work-dir", help="where the runner logs (default work_dirs/eval_variance)")
    p.add_argument("--cfg-options", nargs="+", action=DictAction, help="override config keys")
    args = p.parse_args()
    if args.runs < 0 or (args.runs == 0 and not (args.seeds or args.ensemble)):
        raise CLIError(f"--runs must be >= 1 without --seeds or --ensemble, got {args.runs}")
    if any(k < 1 for k in args.draws or ()):
        raise CLIError(f"--draws must be >= 1, got {args.draws}")
    checkpoint = require_file(args.checkpoint, "checkpoint file")
    cfg = build_config(args.config, args.cfg_options, args.work_dir or "work_dirs/eval_variance")
    if args.tta:
        use_tta(cfg)
    check_dataset_paths(cfg, splits=("test",))
    evaluation = Evaluation(cfg, checkpoint, args.metric)
    found = hams(evaluation.model)
    if (args.seeds or args.ensemble) and not found:
        raise CLIError("--seeds/--ensemble: the model has no hamseg ham (NMF, CD, VQ); use --runs")
    if args.seeds:
        rows = seed_sweep(evaluation, args.seeds, args.draws or [found[0].eval_draws])
        print(f"{args.metric} per eval_seed ({', '.join(map(str, args.seeds))}):")
        for row in rows:
            print(
                f"  eval_draws={row.draws}: {', '.join(f'{v:.2f}' for v in row.values)}  "
                f"range {row.range:.2f}, std {row.std:.2f}, {row.median_seconds:.2f} s per "
                f"evaluation ({row.median_seconds / rows[0].median_seconds:.2f}x)"
            )
    report = None
    if args.runs:
        if found:  # the paper's protocol: a new dictionary at every forward, one draw
            set_protocol(evaluation.model, "paper")
        report = evaluate_repeatedly(evaluation, args.runs, seed=args.seed)
        print(f"{args.metric} per run: {', '.join(f'{v:.4f}' for v in report.values)}")
        print(f"paper's protocol (eval_seed=None, eval_draws=1), {report.line()}")
    if args.ensemble:
        set_protocol(evaluation.model, "ensemble")
        value = evaluation()
        line = f"hamseg's ensemble (eval_seed=0, eval_draws=12): {args.metric} {value:.4f}"
        if report is not None:
            line += f", {value - report.mean:+.4f} against the paper's protocol's mean"
        print(line)


if __name__ == "__main__":
    run_cli(main)
