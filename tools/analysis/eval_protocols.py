"""What hamseg's ensemble evaluation changes against the paper's protocol on one checkpoint.

    python tools/analysis/eval_protocols.py CONFIG CKPT --runs 20 --seeds 0 1 2 3 4 --json out.json

The backbone runs once per image (val, and --train-images training images for re-estimating the
batch norms behind the ham); the head then runs under: the paper's protocol (a new dictionary
for every image at every forward, --runs times, run i seeded with i), the ensemble (the mean of
--draws seeded reconstructions, once per --seeds value), the mean of --draws seeded draws'
logits, the ensemble with the batch norms after the ham re-estimated under it, and, as the
control, the paper's protocol with those norms re-estimated under single draws. Prints each
with its 95% interval and the ensemble's difference to the paper's protocol. docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import json
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from mmengine.config import DictAction  # noqa: E402

from hamseg.cli import CLIError, build_config, run_cli  # noqa: E402
from hamseg.datasets.checks import check_dataset_paths  # noqa: E402
from hamseg.utils.errors import require_file  # noqa: E402
from tools.lab.analysis.eval_variance import Evaluation, difference, hams, interval  # noqa: E402  # noqa: E402
from tools.lab.analysis.protocol_study import ProtocolStudy  # noqa: E402


def measure(study: ProtocolStudy, runs: int, seeds: list[int], draws: int) -> dict:
    """Every protocol's mIoU values and the norms' input variance ratios."""
    values = dict(
        paper=study.paper(runs),
        ensemble=study.ensemble(seeds, draws),
        logits_ensemble=study.logits_ensemble(seeds, draws),
    )
    with study.norms_reestimated(seeds[0], draws) as norms:
        values["ensemble_norms_reestimated"] = study.ensemble(seeds, draws)
    with study.norms_reestimated(None, 1):
        values["paper_norms_reestimated"] = study.paper(runs)
    ratios = dict(
        paper=study.input_variance_ratio(None), ensemble=study.input_variance_ratio(0, draws)
    )
    return dict(
        values=values, norms_after_ham=norms, variance_ratio=ratios, reference=study.reference
    )


def report(result: dict) -> list[str]:
    """One line per protocol, then the ensemble's differences to the paper's protocol."""
    values = result["values"]
    lines = [
        f"{name}: {interval(v).text()}  [{', '.join(f'{x:.2f}' for x in v)}]"
        for name, v in values.items()
    ]
    paper = values["paper"]
    for name in ("ensemble", "logits_ensemble", "ensemble_norms_reestimated"):
        lines.append(f"{name} - paper: {difference(values[name], paper).text()}")
    ratio = result["variance_ratio"]
    if ratio["paper"] is not None:
        lines.append(
            f"{result['norms_after_ham']} batch norm(s) after the ham; the first one's input "
            f"variance / running variance (median over channels): paper {ratio['paper']:.3f}, "
            f"ensemble {ratio['ensemble']:.3f}"
        )
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("config")
    p.add_argument("checkpoint")
    p.add_argument("--runs", type=int, default=20, help="runs of the paper's protocol")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="ensemble seeds")
    p.add_argument("--draws", type=int, default=12, help="K of the ensembles")
    p.add_argument("--train-images", type=int, default=256, help="images for the norms")
    p.add_argument("--json", help="also write the values here")
    p.add_argument("--work-dir", help="where the runner logs (default work_dirs/eval_protocols)")
    p.add_argument("--cfg-options", nargs="+", action=DictAction, help="override config keys")
    args = p.parse_args()
    if args.runs < 2 or len(args.seeds) < 2 or args.draws < 1 or args.train_images < 1:
        raise CLIError("--runs and --seeds need at least 2 values, --draws and --train-images >= 1")
    checkpoint = require_file(args.checkpoint, "checkpoint file")
    cfg = build_config(args.config, args.cfg_options, args.work_dir or "work_dirs/eval_protocols")
    check_dataset_paths(cfg, splits=("train", "test"))
    evaluation = Evaluation(cfg, checkpoint)
    if not hams(evaluation.model):
        raise CLIError("the model has no hamseg ham (NMF, CD, VQ) to evaluate under a protocol")
    result = measure(
        ProtocolStudy(evaluation, args.train_images), args.runs, args.seeds, args.draws
    )
    print("\n".join(report(result)))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(dict(config=args.config, checkpoint=args.checkpoint, **result), f, indent=1)


if __name__ == "__main__":
    run_cli(main)
