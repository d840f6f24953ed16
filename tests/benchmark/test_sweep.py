"""Sweep mode: the log-log slope, and tools/benchmark_context.py --sweep in a fresh process."""

from __future__ import annotations

import json
import math

import pytest

from hamseg.benchmark.sweep import loglog_slope
from tests.benchmark.tools import run_tool


def test_loglog_slope_is_the_exponent():
    assert loglog_slope([(n, 3.0 * n**1.5) for n in (64, 256, 1024)]) == pytest.approx(1.5)
    assert loglog_slope([(64, 2.0), (256, 8.0)]) == pytest.approx(1.0)
    noisy = [(64, 1.0), (256, 4.0 * math.e**0.1), (1024, 16.0)]  # a middle point off the line
    assert loglog_slope(noisy) == pytest.approx(1.0, abs=1e-12)
    assert loglog_slope([(64, 1.0), (64, 5.0)]) == 0.0


def test_sweep_mode_fits_slopes_and_guards_quadratic_memory(tmp_path):
    out = tmp_path / "sweep"
    args = ["--sweep", "--shape", "1", "8", "0", "0", "--sizes", "8", "16", "--rank", "4"]
    args += ["--steps", "2", "--runs", "1", "--warmup", "0", "--out-dir", str(out)]
    args += ["--modules", "ham_nmf", "sa", "--max-pairwise-gb", "1e-6", "--retries", "0"]
    printed = run_tool("benchmark_context.py", *args).stdout
    for ext in ("md", "json", "png"):
        assert (out / f"benchmark_sweep.{ext}").exists()
    result = json.loads((out / "benchmark_sweep.json").read_text())
    sa = [p for p in result["points"] if p["key"] == "sa"]
    ham = [p for p in result["points"] if p["key"] == "ham_nmf"]
    assert [p["n"] for p in ham] == [64, 256] and all("infer_ms" in p for p in ham)
    assert all("skipped" in p for p in sa)  # 3 * n^2 * 4 bytes > 1e-6 GB
    assert set(result["slopes"]["ham_nmf"]) == {
        "infer_ms",
        "train_ms",
        "infer_mem_mb",
        "train_mem_mb",
    }
    for metric, slope in result["slopes"]["ham_nmf"].items():
        points = [(p["n"], p[metric]) for p in ham]
        assert slope == pytest.approx(loglog_slope(points)), metric
    assert "[sweep] sa H=W=8: skipped (n^2 maps need ~0.0 GB > --max-pairwise-gb 1e-06)" in printed
    assert (out / "benchmark_sweep.md").read_text() in printed
