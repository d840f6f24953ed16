"""The comparison's statistics against hand computations."""

import pytest

from projects.context_lab.context_lab.stats import holm, median_interval, rank_test


def test_median_interval_and_its_exact_coverage():
    # n = 10: [x_(2), x_(9)], coverage 1 - 2 (1 + 10) / 2^10 = 97.85%, not 95%
    iv = median_interval([5, 1, 9, 3, 7, 2, 8, 4, 6, 10])
    assert (iv.low, iv.high, iv.coverage) == (2, 9, 1 - 22 / 1024)
    # n = 5 cannot reach 95%: [min, max] with 1 - 2 / 32
    assert median_interval([3, 1, 2, 5, 4]) == pytest.approx(type(iv)(1, 5, 0.9375))
    assert median_interval([1.0]) is None


def test_rank_test_exact_without_ties():
    # rank sum of a = 6 of C(6, 3) = 20 relabellings; only 6 and 15 are as far from 10.5
    t = rank_test([1, 2, 3], [4, 5, 6])
    assert (t.u, t.p, t.shift) == (0, 0.1, -3)
    # differences -5 ... -1; with 3 against 3 no interval reaches 95%: [min, max], 1 - 2/20
    assert (t.interval.low, t.interval.high, t.interval.coverage) == (-5, -1, 0.9)


def test_rank_test_exact_with_ties_by_mid_ranks():
    # values 1, 2, 2, 2, 3, 4 -> mid-ranks 1, 3, 3, 3, 5, 6; a's sum 7, the mean 10.5; of the 20
    # relabellings 3 sum to 7 (1 + two 3s) and 3 to 14 (a 3, 5, 6): p = 6 / 20
    t = rank_test([1, 2, 2], [2, 3, 4])
    assert t.u == 1.0 and t.p == pytest.approx(0.3)


def test_segnext_pair_of_the_ten_seed_table():
    # docs/demo_results.md's per-seed values: "do not differ" is the interval [-0.2, +0.3]
    mmseg = [96.9, 97.0, 96.7, 96.9, 97.1, 97.1, 96.9, 96.9, 97.2, 97.0]
    ours = [96.7, 96.9, 96.5, 96.7, 97.2, 97.1, 97.2, 97.1, 97.2, 96.6]
    t = rank_test(mmseg, ours)
    assert (round(t.interval.low, 1), round(t.interval.high, 1)) == (-0.2, 0.3)
    assert t.interval.coverage == pytest.approx(0.9567, abs=1e-4) and t.p > 0.9


def test_holm_by_hand():
    # sorted 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 -> max so far 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.6, 0.9]) == [1.0, 1.0]
