"""tools.lab.benchmark.speed_paths and tools/benchmark_speed_paths.py on a tiny input."""

from __future__ import annotations

import pytest

from hamseg.models import Hamburger
from hamseg.models.fused_hamburger import PointwiseConv
from tests.helpers import one_thread  # noqa: F401  (fixture)
from tools.lab.benchmark.speed_paths import speed_paths, speed_paths_markdown


@pytest.mark.usefixtures("one_thread")
def test_every_path_is_timed_against_both_off_and_the_switches_are_restored():
    enabled, threshold = PointwiseConv.enabled, Hamburger.fast_path_min_positions
    rows = speed_paths((1, 16, 33, 33), runs=2)  # 1,089 positions: the fused path applies
    assert [(r["variant"], r["mode"], r["paths"]) for r in rows] == [
        ("paper", "infer", "both off"),
        ("paper", "infer", "PointwiseConv"),
        ("paper", "infer", "fused"),
        ("paper", "infer", "both on"),
        ("release", "infer", "both off"),
        ("release", "infer", "PointwiseConv"),
        ("release", "infer", "fused"),
        ("release", "infer", "both on"),
        ("paper", "fwd+bwd", "both off"),
        ("paper", "fwd+bwd", "PointwiseConv"),
    ]
    assert all(r["ms"] > 0 for r in rows)
    assert [r["ratio"] for r in rows if r["paths"] == "both off"] == [1.0, 1.0, 1.0]
    assert (PointwiseConv.enabled, Hamburger.fast_path_min_positions) == (enabled, threshold)
    table = speed_paths_markdown(rows, "title").splitlines()
    assert table[0] == "title" and len(table) == 4 + len(rows)
    assert table[5].startswith("| paper | infer | PointwiseConv | ")
