"""Statistics of a head comparison over seeds, all distribution-free: outcomes of short trainings
are often bimodal (a run crosses a plateau or does not), so no mean +- std.

- :func:`median_interval`: order statistics [x_(k), x_(n+1-k)] with their exact coverage.
- :func:`rank_test`: two-sided Mann-Whitney U, exact also with ties (the permutation
  distribution of the mid-rank sum), with the Hodges-Lehmann shift and its interval.
- :func:`holm`: Holm's step-down adjustment of a family of p-values.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    coverage: float  # exact, under the method's assumptions


def median_interval(values: Sequence[float], level: float = LEVEL) -> Optional[Interval]:
    """The narrowest [x_(k), x_(n+1-k)] whose coverage 1 - 2 P(Bin(n, 1/2) <= k - 1) reaches
    ``level`` (n = 10: k = 2, 97.9%); [min, max] with its coverage when n is too small."""
    xs, n = sorted(values), len(values)
    if n < 2:
        return None
    cover = lambda k: 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n  # noqa: E731
    k = max([k for k in range(1, n // 2 + 1) if cover(k) >= level] or [1])
    return Interval(xs[k - 1], xs[n - k], cover(k))


def _ranks(values: Sequence[float]) -> list[float]:
    """Mid-ranks (1-based; ties share their mean rank)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for t in order[i : j + 1]:
            ranks[t] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _sum_counts(scores: Sequence[int], m: int) -> dict[int, int]:
    """How many m-subsets of ``scores`` have each sum (a dynamic programme over the items)."""
    table: list[dict[int, int]] = [{0: 1}] + [{} for _ in range(m)]
    for s in scores:
        for size in range(min(m, len(scores)), 0, -1):
            for total, count in table[size - 1].items():
                table[size][total + s] = table[size].get(total + s, 0) + count
    return table[m]


@dataclass(frozen=True)
class RankTest:
    """``u``: pairs with a > b (ties 1/2); ``p``: exact two-sided; ``shift``: Hodges-Lehmann
    estimate of a - b (median of all differences) in ``interval`` (coverage as if untied)."""

    u: float
    p: float
    shift: float
    interval: Interval


def rank_test(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> RankTest:
    """Mann-Whitney U of ``a`` against ``b``: p is the share of the C(n, m) relabellings whose
    rank sum lies as far from its mean as the observed one (exact with ties, mid-ranks)."""
    m, n = len(a), len(b)
    doubled = [round(2 * r) for r in _ranks([*a, *b])]
    observed = sum(doubled[:m])
    mean = m * (m + n + 1)  # the doubled rank sum's mean
    counts = _sum_counts(doubled, m)
    extreme = sum(c for s, c in counts.items() if abs(s - mean) >= abs(observed - mean))
    p = extreme / math.comb(m + n, m)
    diffs = sorted(x - y for x in a for y in b)
    null = _sum_counts(list(range(1, m + n + 1)), m)  # untied: U = rank sum - m (m + 1) / 2
    cdf = lambda k: sum(c for s, c in null.items() if s - m * (m + 1) // 2 <= k)  # noqa: E731
    cover = lambda k: 1 - 2 * cdf(k - 1) / math.comb(m + n, m)  # noqa: E731
    k = max([k for k in range(1, m * n // 2 + 1) if cover(k) >= level] or [1])
    interval = Interval(diffs[k - 1], diffs[m * n - k], cover(k))
    u = (observed / 2) - m * (m + 1) / 2
    return RankTest(u, min(1.0, p), statistics.median(diffs), interval)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's adjusted p-values, in the input order: p_(i) (m - i + 1), running maximum, <= 1."""
    order = sorted(range(len(pvalues)), key=pvalues.__getitem__)
    adjusted, running = [0.0] * len(pvalues), 0.0
    for i, j in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - i) * pvalues[j]))
        adjusted[j] = running
    return adjusted


def first_reaching(curve: Sequence[Sequence[float]], threshold: float) -> Optional[int]:
    """The first iteration of ``curve`` ((iteration, value) pairs) with value >= ``threshold``."""
    return next((int(it) for it, v in sorted(curve) if v >= threshold), None)
