"""How much the test mIoU of one checkpoint moves between evaluations.

A Hamburger whose ham draws a new random dictionary at every forward (mmseg's ``LightHamHead``,
and hamseg's hams with ``eval_seed=None``, as the release) gives a slightly different mIoU at
every test run of one checkpoint (SegNeXt issues #52, #66, #68, #69; mmseg #3735). With a seeded
dictionary (``eval_seed``) every run gives the same number. :func:`evaluate_repeatedly` runs the
test loop of any mmseg config N times on one model; :func:`summarize` gives mean, std, min, max.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass

from mmengine.config import Config
from mmengine.runner import Runner
from mmengine.utils import ProgressBar

from hamseg.apis.checkpoint import check_checkpoint_file

__all__ = ["VarianceReport", "evaluate_repeatedly", "summarize"]


@dataclass(frozen=True)
class VarianceReport:
    """mIoU of each run and their statistics (std: sample standard deviation, 0 for one run)."""

    values: tuple[float, ...]
    mean: float
    std: float
    min: float
    max: float

    def line(self) -> str:
        return (
            f"mIoU over {len(self.values)} evaluations: mean {self.mean:.4f}, std {self.std:.4f}, "
            f"min {self.min:.4f}, max {self.max:.4f}"
        )


def summarize(values: list[float]) -> VarianceReport:
    """Mean, sample std, min and max of ``values``."""
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return VarianceReport(tuple(values), statistics.fmean(values), std, min(values), max(values))


def evaluate_repeatedly(
    cfg: Config, checkpoint: str, runs: int = 5, metric: str = "mIoU", progress: bool = True
) -> VarianceReport:
    """Build the model once, load ``checkpoint`` strictly, run the test loop ``runs`` times.

    Args:
        cfg: Any mmseg config (with ``work_dir`` and ``launcher`` set, as the tools set them).
        checkpoint: The checkpoint to evaluate.
        runs: Number of evaluations.
        metric: Key of the evaluator's result to collect.
        progress: Show a progress bar over the runs.

    Raises:
        CheckpointMismatchError: The checkpoint does not fit the config's model.
        KeyError: The evaluator reports no ``metric``.
    """
    cfg.load_from = checkpoint
    runner = Runner.from_cfg(cfg)
    check_checkpoint_file(runner.model, checkpoint)
    bar = ProgressBar(runs, file=sys.stdout) if progress else None
    values = []
    for i in range(runs):
        metrics = runner.test() if i == 0 else runner.test_loop.run()
        if metric not in metrics:
            raise KeyError(f"the test evaluator reports {sorted(metrics)}, not {metric!r}")
        values.append(float(metrics[metric]))
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.file.write("\n")  # the bar redraws its line with '\r' and never ends it
        bar.file.flush()
    return summarize(values)
