"""How much the test mIoU of one checkpoint depends on the ham's random dictionary.

A Hamburger whose ham draws a new random dictionary at every forward (mmseg's ``LightHamHead``,
hamseg's hams with ``eval_seed=None``, as the release) gives another mIoU at every test run of one
checkpoint (SegNeXt issues #52, #66, #68, #69; mmseg #3735). A seeded evaluation (``eval_seed``)
is repeatable, but its number is that of the dictionaries the seed drew. Two measurements answer
"how much does the number depend on the draw": :func:`evaluate_repeatedly` runs the test loop N
times with fresh random dictionaries; :func:`seed_sweep` evaluates once per ``eval_seed`` for each
ensemble size K (``eval_draws``) and times every evaluation, alternating between the K values so
that their times are measured side by side.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from mmengine.config import Config
from mmengine.runner import Runner
from mmengine.utils import ProgressBar
from torch import nn

from hamseg.apis.checkpoint import check_checkpoint_file
from hamseg.models.decompositions import MatrixDecomposition2D

__all__ = [
    "Evaluation",
    "SweepRow",
    "VarianceReport",
    "evaluate_repeatedly",
    "hams",
    "seed_sweep",
    "set_eval_draws",
    "summarize",
]


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


def summarize(values: Sequence[float]) -> VarianceReport:
    """Mean, sample std, min and max of ``values``."""
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return VarianceReport(tuple(values), statistics.fmean(values), std, min(values), max(values))


@dataclass(frozen=True)
class SweepRow:
    """One ensemble size K of a seed sweep: the mIoU and seconds of each seed's evaluation."""

    draws: int
    seeds: tuple[int, ...]
    values: tuple[float, ...]
    seconds: tuple[float, ...]

    @property
    def range(self) -> float:
        return max(self.values) - min(self.values)

    @property
    def std(self) -> float:
        return summarize(self.values).std

    @property
    def median_seconds(self) -> float:
        return statistics.median(self.seconds)


def hams(model: nn.Module) -> list[MatrixDecomposition2D]:
    """The hamseg hams (NMF, CD, VQ) in ``model``."""
    return [m for m in model.modules() if isinstance(m, MatrixDecomposition2D)]


def set_eval_draws(model: nn.Module, seed: int | None, draws: int | None = None) -> None:
    """Set ``eval_seed`` (and ``eval_draws`` unless None) of every hamseg ham in ``model``.

    Raises:
        ValueError: The model has no hamseg ham (e.g. mmseg's ``LightHamHead``).
    """
    found = hams(model)
    if not found:
        raise ValueError(
            "the model has no hamseg ham (NMF, CD, VQ) whose eval_seed/eval_draws could be set; "
            "mmseg's LightHamHead has neither: measure it with random evaluations (--runs)"
        )
    for ham in found:
        ham.eval_seed = seed
        if draws is not None:
            ham.eval_draws = draws


class Evaluation:
    """One checkpoint's test loop, run again and again on one model (built once).

    Args:
        cfg: Any mmseg config (with ``work_dir`` and ``launcher`` set, as the tools set them).
        checkpoint: The checkpoint to evaluate; checked strictly against the config's model.
        metric: Key of the evaluator's result that a run returns.

    Raises:
        CheckpointMismatchError: The checkpoint does not fit the config's model.
    """

    def __init__(self, cfg: Config, checkpoint: str, metric: str = "mIoU") -> None:
        cfg.load_from = checkpoint
        self.runner = Runner.from_cfg(cfg)
        check_checkpoint_file(self.runner.model, checkpoint)
        self.metric = metric
        self._runs = 0

    @property
    def model(self) -> nn.Module:
        return self.runner.model

    def __call__(self) -> float:
        """One evaluation (the first one loads the weights: ``runner.test``).

        Raises:
            KeyError: The evaluator reports no ``metric``.
        """
        loop = self.runner.test if self._runs == 0 else self.runner.test_loop.run
        metrics = loop()
        self._runs += 1
        if self.metric not in metrics:
            raise KeyError(f"the test evaluator reports {sorted(metrics)}, not {self.metric!r}")
        return float(metrics[self.metric])


def _progress(total: int, show: bool) -> ProgressBar | None:
    return ProgressBar(total, file=sys.stdout) if show else None


def _end(bar: ProgressBar | None) -> None:
    if bar is not None:
        bar.file.write("\n")  # the bar redraws its line with '\r' and never ends it
        bar.file.flush()


def evaluate_repeatedly(
    evaluation: Evaluation, runs: int = 5, progress: bool = True
) -> VarianceReport:
    """Run the test loop ``runs`` times on one model, as configured (with ``eval_seed=None``
    every run draws new dictionaries).

    Raises:
        KeyError: The evaluator reports no metric of that name.
    """
    bar, values = _progress(runs, progress), []
    for _ in range(runs):
        values.append(evaluation())
        if bar is not None:
            bar.update()
    _end(bar)
    return summarize(values)


def seed_sweep(
    evaluation: Evaluation,
    seeds: Sequence[int],
    draws: Sequence[int] = (1,),
    progress: bool = True,
) -> list[SweepRow]:
    """One evaluation per ``eval_seed`` and ensemble size K (``eval_draws``), timed.

    For every seed the K values run one after another, so each K's times come from the same
    stretch of the machine's load (a side-by-side measurement).

    Args:
        evaluation: The checkpoint's test loop.
        seeds: The ``eval_seed`` values.
        draws: The ``eval_draws`` values K.
        progress: Show a progress bar.

    Returns:
        One :class:`SweepRow` per K, in the order of ``draws``.

    Raises:
        ValueError: The model has no hamseg ham.
    """
    results = {k: ([], []) for k in draws}
    bar = _progress(len(seeds) * len(draws), progress)
    for seed in seeds:
        for k in draws:
            set_eval_draws(evaluation.model, seed, k)
            start = time.perf_counter()
            value = evaluation()
            results[k][1].append(time.perf_counter() - start)
            results[k][0].append(value)
            if bar is not None:
                bar.update()
    _end(bar)
    return [SweepRow(k, tuple(seeds), tuple(v), tuple(s)) for k, (v, s) in results.items()]
