"""Statistics of a head comparison over seeds: per-head summaries that show a bimodal outcome
(median, range, a distribution-free interval, how many seeds reached a threshold), the
Mann-Whitney rank test against the best head and iterations-to-threshold of learning curves.

Outcomes of short trainings are often bimodal (a run crosses a plateau or does not), so the
summaries are order statistics, not mean +- std, and the test is a rank test.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from scipy import stats

#: The coverage a median interval must reach (else the widest one, with its lower coverage).
LEVEL = 0.95


@dataclass(frozen=True)
class MedianInterval:
    """``[low, high]`` = the k-th smallest and k-th largest value: a distribution-free interval
    for the median with exact ``coverage`` (binomial; needs n >= 6 for 95%)."""

    low: float
    high: float
    coverage: float


def median_interval(values: Sequence[float], level: float = LEVEL) -> Optional[MedianInterval]:
    """The narrowest order-statistic interval for the median of ``values`` whose coverage,
    ``1 - 2 P(Binomial(n, 1/2) <= k - 1)``, reaches ``level``; for n too small to reach it, the
    widest one ``[min, max]`` with its coverage; None for fewer than 2 values."""
    xs = sorted(values)
    n = len(values)
    if n < 2:
        return None
    coverage = lambda k: 1.0 - 2.0 * stats.binom.cdf(k - 1, n, 0.5)  # noqa: E731
    k = max([k for k in range(1, n // 2 + 1) if coverage(k) >= level] or [1])
    return MedianInterval(xs[k - 1], xs[n - k], float(coverage(k)))


@dataclass(frozen=True)
class RankTest:
    """Two-sided Mann-Whitney U test of ``a`` against ``b``: ``u`` counts the pairs with
    a > b (ties 1/2), ``p`` is exact (no ties) or the normal approximation with tie and
    continuity corrections; ``shift`` is the Hodges-Lehmann estimate, the median of all
    differences a_i - b_j."""

    u: float
    p: float
    exact: bool
    shift: float


def rank_test(a: Sequence[float], b: Sequence[float]) -> RankTest:
    """:class:`RankTest` of ``a`` against ``b`` (each at least one value)."""
    tied = len(set(a) | set(b)) < len(a) + len(b)
    method = "asymptotic" if tied else "exact"
    res = stats.mannwhitneyu(a, b, alternative="two-sided", method=method)
    shift = statistics.median(x - y for x in a for y in b)
    return RankTest(float(res.statistic), float(res.pvalue), not tied, float(shift))


def first_reaching(curve: Sequence[tuple[int, float]], threshold: float) -> Optional[int]:
    """The first iteration of ``curve`` ((iteration, value) pairs, any order) whose value is at
    least ``threshold``; None if it never is."""
    return next((it for it, v in sorted(curve) if v >= threshold), None)


@dataclass(frozen=True)
class Summary:
    """A head's final values over seeds: ``n``, ``median``, ``low``/``high`` (range), ``mean``,
    ``interval`` (:func:`median_interval`), ``reached`` (seeds at or above the threshold) and
    the median iterations to reach it (``math.inf`` when more than half never did; None without
    curves)."""

    n: int
    median: float
    low: float
    high: float
    mean: float
    interval: Optional[MedianInterval]
    reached: int
    iters_to_threshold: Optional[float]


def summarize(
    values: Sequence[float],
    threshold: float,
    curves: Sequence[Sequence[tuple[int, float]]] = (),
) -> Summary:
    """:class:`Summary` of one head's ``values`` (one per seed) and learning ``curves``."""
    iters = None
    if curves:
        hits = [first_reaching(c, threshold) for c in curves]
        iters = statistics.median([math.inf if h is None else h for h in hits])
    return Summary(
        n=len(values),
        median=statistics.median(values),
        low=min(values),
        high=max(values),
        mean=statistics.fmean(values),
        interval=median_interval(values),
        reached=sum(v >= threshold for v in values),
        iters_to_threshold=iters,
    )


def best_by_median(results: dict[str, Sequence[float]]) -> str:
    """The name whose values have the highest median (the first of equals)."""
    return max(results, key=lambda name: statistics.median(results[name]))


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p the exact test can give for samples of ``n_a`` and ``n_b``
    values, ``2 / C(n_a + n_b, n_a)``: 3 seeds against 3 never go below 0.1."""
    return 2.0 / math.comb(n_a + n_b, n_a)
