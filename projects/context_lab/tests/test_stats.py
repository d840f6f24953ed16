"""tools.lab.analysis.head_stats against hand computations."""

from __future__ import annotations

import math

import pytest

from tools.lab.analysis.head_stats import (
    best_by_median,
    first_reaching,
    median_interval,
    rank_test,
    smallest_p,
    summarize,
)


def test_rank_test_exact_by_hand():
    """a = 1 2 3 vs b = 4 5 6: no pair has a > b, U = 0; of the C(6, 3) = 20 equally likely
    splits one gives U = 0 and one U = 9, so p = 2/20. a = 1 3 5 vs b = 2 4 6: U = 0 + 1 + 2 = 3;
    the null counts of U = 0..3 are 1, 1, 2, 3, so p = 2 * 7/20."""
    t = rank_test([1, 2, 3], [4, 5, 6])
    assert (t.u, t.exact) == (0.0, True) and t.p == pytest.approx(0.1)
    assert t.shift == -3.0  # differences -3 -4 -5 -2 -3 -4 -1 -2 -3: median -3
    t = rank_test([1, 3, 5], [2, 4, 6])
    assert t.u == 3.0 and t.p == pytest.approx(0.7)
    assert rank_test([4, 5, 6], [1, 2, 3]).u == 9.0  # the other side: n_a n_b - 0


def test_rank_test_with_ties_uses_the_corrected_normal_approximation():
    """a = 1 2 2 vs b = 2 3 4. Mid-ranks: 1 -> 1, the three 2s -> 3, 3 -> 5, 4 -> 6; R_a = 7,
    U = 7 - 6 = 1. Mean 4.5; variance (9/12) (7 - (3^3 - 3)/(6 * 5)) = 4.65; z = (3.5 - 0.5) /
    sqrt(4.65) = 1.39122; p = 2 (1 - Phi(z)) = 0.164160."""
    t = rank_test([1, 2, 2], [2, 3, 4])
    assert (t.u, t.exact) == (1.0, False)
    z = 3.0 / math.sqrt(4.65)
    assert t.p == pytest.approx(math.erfc(z / math.sqrt(2)), rel=1e-9)
    assert t.p == pytest.approx(0.164160, abs=1e-6)


def test_smallest_p_is_what_n_seeds_can_show():
    assert smallest_p(3, 3) == pytest.approx(0.1)
    assert smallest_p(10, 10) == pytest.approx(2 / 184756)
    assert rank_test(list(range(10)), list(range(10, 20))).p == pytest.approx(2 / 184756)


def test_median_interval_order_statistics_by_hand():
    """n = 10: [x_(2), x_(9)] covers the median with 1 - 2 P(B(10, 1/2) <= 1) = 1 - 22/1024;
    [x_(3), x_(8)] would cover only 1 - 2 * 56/1024 = 0.89. n = 5 cannot reach 95%: [min, max]
    covers 1 - 2/32. One value: no interval."""
    iv = median_interval([7, 1, 9, 3, 5, 10, 2, 8, 4, 6])
    assert (iv.low, iv.high) == (2, 9) and iv.coverage == pytest.approx(1 - 22 / 1024)
    iv = median_interval([5, 1, 4, 2, 3])
    assert (iv.low, iv.high) == (1, 5) and iv.coverage == pytest.approx(1 - 2 / 32)
    assert median_interval([3.0]) is None


def test_first_reaching_and_summary_of_a_bimodal_head():
    """Seeds 60, 95, 96, 62, 97: median 95, range 60-97, 3 of 5 at >= 90; the curves reach 90
    at 200, 300, never, 100 and never -> median of (200, 300, inf, 100, inf) = 300."""
    curves = [
        [(100, 50.0), (200, 91.0)],
        [(300, 92.0), (100, 10.0), (200, 89.9)],
        [(100, 60.0)],
        [(100, 90.0)],
        [],
    ]
    assert [first_reaching(c, 90.0) for c in curves] == [200, 300, None, 100, None]
    s = summarize([60.0, 95.0, 96.0, 62.0, 97.0], 90.0, curves)
    assert (s.n, s.median, s.low, s.high, s.reached) == (5, 95.0, 60.0, 97.0, 3)
    assert s.mean == pytest.approx(82.0) and s.iters_to_threshold == 300
    assert summarize([80.0, 85.0], 90.0, [[(100, 1.0)], [(100, 2.0)]]).iters_to_threshold == (
        math.inf
    )
    assert summarize([91.0], 90.0).iters_to_threshold is None  # no curves


def test_best_by_median_not_by_mean():
    """A bimodal head with the higher median wins over a steady one with the higher mean."""
    results = {"steady": [90.0, 90.0, 90.0], "bimodal": [95.0, 95.0, 60.0]}
    assert best_by_median(results) == "bimodal"
