"""hamseg.benchmark.segnext: the SegNeXt head comparison runs and reports consistent numbers."""

from __future__ import annotations

import pytest
import torch

from hamseg.benchmark.segnext import build_pair, compare, markdown
from tests.helpers import one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_pair_has_the_same_weights_and_only_the_head_type_differs():
    ours, theirs = build_pair()
    assert type(ours.decode_head).__name__ == "HamLightHead"
    assert type(theirs.decode_head).__name__ == "LightHamHead"
    a, b = ours.state_dict(), theirs.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_compare_reports_ratios_of_its_own_medians():
    result = compare(batch=1, size=64, runs=1)
    assert [r["part"] for r in result["rows"]] == [
        "ham (NMF, r=16, 6 steps)",
        "decode head",
        "whole model, one iteration",
    ]
    for r in result["rows"]:
        assert r["time_ratio"] == pytest.approx(r["time_ours"] / r["time_mmseg"])
        assert r["mem_ratio"] == pytest.approx(r["mem_ours"] / r["mem_mmseg"])
        assert r["mem_ours"] > 0 and r["mem_mmseg"] > 0
    table = markdown(result)
    assert "| decode head |" in table and "1x3x64x64" in table and "cpu" in table
