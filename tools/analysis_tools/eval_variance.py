"""The number to report for a checkpoint whose ham draws a random dictionary (docs/evaluation.md):
the mean of N test runs under the paper's protocol with its 95% interval, on one process or N.

    python tools/analysis_tools/eval_variance.py CONFIG CKPT --runs 5 --tta [--ensemble]
    torchrun --nproc_per_node 8 tools/analysis_tools/eval_variance.py CONFIG CKPT --runs 5 --tta \
        --launcher pytorch

The paper's protocol (eval_seed=None, eval_draws=1): a new dictionary for every image at every
forward, as the release and mmseg's LightHamHead. Run i draws image x's dictionaries after
torch.manual_seed(crc32(f"{--seed + i}:{x's path under data_root}")), so the runs are the same on
any number of ranks (test batch size 1, as the recipes) and wherever the data lies. --ensemble:
one run of hamseg's deterministic ensemble (eval_seed=0, eval_draws=12) and its difference to the
mean. Any mmseg config.
"""

import argparse
import os.path as osp
import statistics
import zlib

import torch
from mmengine.config import DictAction
from mmengine.dist import is_main_process
from mmengine.hooks import Hook
from mmengine.runner import Runner
from scipy.stats import t

from hamseg.apis.checkpoint import check_checkpoint_file
from hamseg.cli import LAUNCHERS, CLIError, build_config, run_cli
from hamseg.datasets.checks import check_dataset_paths
from hamseg.engine.tta import use_tta
from hamseg.models import MatrixDecomposition2D
from hamseg.utils.errors import require_file

PAPER, ENSEMBLE = dict(eval_seed=None, eval_draws=1), dict(eval_seed=0, eval_draws=12)


class ImageSeedHook(Hook):
    """Seed torch before every test batch with its run and its images' paths."""

    def __init__(self, seed: int) -> None:
        self.seed, self.root = seed, ""

    def before_test(self, runner) -> None:
        self.root = getattr(runner.test_dataloader.dataset, "data_root", None) or ""

    def before_test_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        samples = data_batch["data_samples"]
        samples = samples[0] if isinstance(samples[0], list) else samples
        paths = [osp.relpath(s.img_path, self.root) if self.root else s.img_path for s in samples]
        torch.manual_seed(zlib.crc32(f"{self.seed}:{'|'.join(paths)}".encode()))


def set_protocol(model: torch.nn.Module, protocol: dict) -> int:
    """Set eval_seed and eval_draws of every hamseg ham of ``model``; how many there are."""
    hams = [m for m in model.modules() if isinstance(m, MatrixDecomposition2D)]
    for ham in hams:
        ham.eval_seed, ham.eval_draws = protocol["eval_seed"], protocol["eval_draws"]
    return len(hams)


def interval(values: list[float]) -> tuple[float, float, float]:
    """Mean, half width of its 95% Student t interval, sample std (0, 0 for one value)."""
    if len(values) == 1:
        return values[0], 0.0, 0.0
    std = statistics.stdev(values)
    return (
        statistics.fmean(values),
        float(t.ppf(0.975, len(values) - 1)) * std / len(values) ** 0.5,
        std,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("config")
    p.add_argument("checkpoint")
    p.add_argument("--runs", type=int, default=5, help="test runs of the paper's protocol")
    p.add_argument("--seed", type=int, default=0, help="run i seeds its images with seed + i")
    p.add_argument("--ensemble", action="store_true", help="also one run of hamseg's ensemble")
    p.add_argument("--tta", action="store_true", help="the config's test-time augmentation")
    p.add_argument("--metric", default="mIoU", help="the evaluator's metric to report")
    p.add_argument("--work-dir", help="where the runner logs (default work_dirs/eval_variance)")
    p.add_argument("--cfg-options", nargs="+", action=DictAction, help="override config keys")
    p.add_argument("--launcher", choices=LAUNCHERS, default="none", help="job launcher")
    p.add_argument("--local_rank", "--local-rank", type=int, default=0)
    args = p.parse_args()
    if args.runs < 1:
        raise CLIError(f"--runs must be >= 1, got {args.runs}")
    checkpoint = require_file(args.checkpoint, "checkpoint file")
    work_dir = args.work_dir or "work_dirs/eval_variance"
    cfg = build_config(args.config, args.cfg_options, work_dir, args.launcher, args.local_rank)
    if args.tta:
        use_tta(cfg)
    check_dataset_paths(cfg, splits=("test",))
    cfg.load_from = checkpoint
    runner = Runner.from_cfg(cfg)
    check_checkpoint_file(runner.model, checkpoint)
    seeder = ImageSeedHook(args.seed)
    runner.register_hook(seeder, priority="VERY_HIGH")
    if not set_protocol(runner.model, PAPER) and args.ensemble:
        raise CLIError("--ensemble: the model has no hamseg ham (NMF, CD, VQ)")

    def evaluate(run: int) -> float:
        seeder.seed = args.seed + run
        metrics = runner.test() if run == 0 else runner.test_loop.run()
        if args.metric not in metrics:
            raise CLIError(
                f"--metric: the test evaluator reports {sorted(metrics)}, not {args.metric}"
            )
        return float(metrics[args.metric])

    values = [evaluate(run) for run in range(args.runs)]
    mean, half, std = interval(values)
    lines = [
        f"{args.metric} per run: {', '.join(f'{v:.4f}' for v in values)}",
        f"paper's protocol (eval_seed=None, eval_draws=1), {args.metric} over {len(values)} runs: "
        f"mean {mean:.4f} +- {half:.4f} (95% CI), std {std:.4f}",
    ]
    if args.ensemble:
        set_protocol(runner.model, ENSEMBLE)
        value = evaluate(args.runs)
        lines.append(
            f"hamseg's ensemble (eval_seed=0, eval_draws=12): {args.metric} {value:.4f}, "
            f"{value - mean:+.4f} against the paper's protocol's mean"
        )
    if is_main_process():
        print("\n".join(lines), flush=True)


if __name__ == "__main__":
    run_cli(main)
