"""How much one checkpoint's test mIoU depends on the ham's random dictionary (docs/evaluation.md).

:func:`evaluate_repeatedly` runs the test loop N times as configured; under the paper's protocol
(``eval_seed=None, eval_draws=1``: new dictionaries at every forward, as the release and mmseg's
``LightHamHead``) each run draws others, and :func:`interval` gives their mean with a 95%
interval. :func:`seed_sweep` evaluates once per ``eval_seed`` and ensemble size K
(``eval_draws``), timed, the K values side by side.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from mmengine.config import Config
from mmengine.runner import Runner
from mmengine.utils import ProgressBar
from torch import nn

from hamseg.apis.checkpoint import check_checkpoint_file
from hamseg.models.decompositions import EVAL_PROTOCOLS, MatrixDecomposition2D


@dataclass(frozen=True)
class Interval:
    """Mean of n values with the half width of its 95% t interval (0 for one value)."""

    mean: float
    std: float
    n: int
    half_width: float

    def text(self) -> str:
        if self.n == 1:
            return f"{self.mean:.2f} (n = 1)"
        return (
            f"{self.mean:.2f} +- {self.half_width:.2f} (95% CI; std {self.std:.2f}, n = {self.n})"
        )


def interval(values: Sequence[float]) -> Interval:
    """The mean of ``values`` with a 95% Student t interval (sample std)."""
    from scipy.stats import t

    n = len(values)
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if n > 1 else 0.0
    half = float(t.ppf(0.975, n - 1)) * std / n**0.5 if n > 1 else 0.0
    return Interval(mean, std, n, half)


def difference(a: Sequence[float], b: Sequence[float]) -> Interval:
    """mean(a) - mean(b) with Welch's 95% interval (``std``: its standard error; ``n``: the
    smaller sample)."""
    from scipy.stats import t

    va = statistics.variance(a) / len(a)
    vb = statistics.variance(b) / len(b)
    se = (va + vb) ** 0.5
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if se > 0 else 1.0
    diff = statistics.fmean(a) - statistics.fmean(b)
    return Interval(diff, se, min(len(a), len(b)), float(t.ppf(0.975, dof)) * se)


@dataclass(frozen=True)
class VarianceReport:
    """mIoU of each run and their statistics (std: sample standard deviation, 0 for one run)."""

    values: tuple[float, ...]
    mean: float
    std: float
    min: float
    max: float

    def line(self) -> str:
        ci = interval(self.values)
        return (
            f"mIoU over {len(self.values)} evaluations: mean {self.mean:.4f} +- "
            f"{ci.half_width:.4f} (95% CI), std {self.std:.4f}, min {self.min:.4f}, "
            f"max {self.max:.4f}"
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
    """Set ``eval_seed`` (and ``eval_draws`` unless None) of every hamseg ham in ``model``;
    ValueError if it has none (e.g. mmseg's ``LightHamHead``)."""
    found = hams(model)
    if not found:
        raise ValueError(
            "the model has no hamseg ham (NMF, CD, VQ) whose eval_seed/eval_draws could be set; "
            "mmseg's LightHamHead has neither: measure it with random evaluations (--runs)"
        )
    for ham in found:
        ham.eval_seed = seed
        ham.eval_draws = ham.eval_draws if draws is None else draws


def set_protocol(model: nn.Module, name: str) -> None:
    """Evaluate every hamseg ham of ``model`` under ``EVAL_PROTOCOLS[name]`` ('paper',
    'ensemble'); ValueError for another name or a model without one."""
    if name not in EVAL_PROTOCOLS:
        raise ValueError(f"protocol must be one of {sorted(EVAL_PROTOCOLS)}, got {name!r}")
    set_eval_draws(model, EVAL_PROTOCOLS[name]["eval_seed"], EVAL_PROTOCOLS[name]["eval_draws"])


class Evaluation:
    """One checkpoint's test loop (``metric`` of its evaluator), run again and again on one
    model built once from ``cfg`` (``work_dir``, ``launcher`` set); the checkpoint is checked
    strictly (:class:`~hamseg.apis.CheckpointMismatchError`)."""

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
        """One evaluation (the first loads the weights: ``runner.test``); KeyError if the
        evaluator reports no ``metric``."""
        metrics = (self.runner.test if self._runs == 0 else self.runner.test_loop.run)()
        self._runs += 1
        if self.metric not in metrics:
            raise KeyError(f"the test evaluator reports {sorted(metrics)}, not {self.metric!r}")
        return float(metrics[self.metric])


def _timed(evaluation: Evaluation, settings: Sequence, progress: bool, set_up) -> list:
    """(value, seconds) of one evaluation per setting, after ``set_up(setting)``; a progress
    bar whose line is ended (it redraws with '\\r' and never ends it itself)."""
    bar = ProgressBar(len(settings), file=sys.stdout) if progress else None
    results = []
    for setting in settings:
        set_up(setting)
        start = time.perf_counter()
        results.append((evaluation(), time.perf_counter() - start))
        if bar is not None:
            bar.update()
    if bar is not None:
        print(file=bar.file, flush=True)
    return results


def evaluate_repeatedly(
    evaluation: Evaluation, runs: int = 5, progress: bool = True, seed: int | None = None
) -> VarianceReport:
    """Run the test loop ``runs`` times on one model as configured (``eval_seed=None``: new
    dictionaries every run); with ``seed``, run i after ``torch.manual_seed(seed + i)`` (the
    whole report repeats)."""
    set_up = (lambda run: torch.manual_seed(seed + run)) if seed is not None else lambda _: None
    results = _timed(evaluation, range(runs), progress, set_up)
    return summarize([value for value, _ in results])


def seed_sweep(
    evaluation: Evaluation, seeds: Sequence[int], draws: Sequence[int] = (1,), progress: bool = True
) -> list[SweepRow]:
    """One timed evaluation per ``eval_seed`` and ensemble size K (``eval_draws``; per seed the
    K values one after another: their times side by side); a :class:`SweepRow` per K."""
    settings = [(seed, k) for seed in seeds for k in draws]
    results = _timed(evaluation, settings, progress, lambda s: set_eval_draws(evaluation.model, *s))
    rows = []
    for k in draws:
        mine = [r for (_, kk), r in zip(settings, results) if kk == k]
        rows.append(SweepRow(k, tuple(seeds), *(tuple(v) for v in zip(*mine))))
    return rows
