"""tools/benchmark_train_iter.py in a fresh process (so that its peak RSS is the iteration's):
a tiny config (fast), and the full ResNet-101 ham_voc model at 513x513 on CPU (slow).

The slow test prints the time and peak memory (visible with ``pytest -s`` or ``-rP``);
docs/recipes.md records a measured run.
"""

from __future__ import annotations

import json
import math
import os.path as osp
import subprocess
import sys

import pytest

from hamseg.benchmark.train_iter import summary
from tests.benchmark.tools import run_tool
from tests.conftest import REPO


def test_tiny_train_iterations(tmp_path):
    out = tmp_path / "bench.json"
    args = ["tests/data/tiny_ham.py", "--size", "33", "--batch-size", "2", "--iters", "2"]
    printed = run_tool("benchmark_train_iter.py", *args, "--threads", "1", "--out", str(out))
    report = json.loads(out.read_text())
    assert report["config"] == osp.join("tests", "data", "tiny_ham.py")
    assert (report["batch_size"], report["size"], report["iters"]) == (2, 33, 2)
    assert report["threads"] == 1 and len(report["seconds_per_iter"]) == 2
    assert all(math.isfinite(v) and abs(v - math.log(3)) < 0.5 for v in report["loss"])
    assert report["peak_rss_mib"] >= report["rss_before_mib"] > 0
    assert printed.stdout == summary(report) + "\n"
    assert printed.stdout.splitlines()[1] == "batch x size           2 x 33x33"


def test_a_missing_config_is_one_line(tmp_path):
    missing = str(tmp_path / "nope.py")
    cmd = [sys.executable, osp.join(REPO, "tools", "benchmark_train_iter.py"), missing]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: config file not found: {missing}"


@pytest.mark.slow
def test_full_size_train_iteration(tmp_path):
    out = tmp_path / "bench.json"
    args = ["configs/ham_voc.py", "--size", "513", "--iters", "1", "--out", str(out)]
    result = run_tool("benchmark_train_iter.py", *args, timeout=3600)
    report = json.loads(out.read_text())
    print("\n" + result.stdout)
    assert (report["batch_size"], report["size"], report["iters"]) == (2, 513, 1)
    assert report["params_m"] == pytest.approx(54.04, abs=0.01)  # R101 deep stem + HamHead V2
    loss = report["loss"][0]
    assert math.isfinite(loss) and abs(loss - math.log(21)) < 1.0  # random init, 21 classes
    assert report["peak_rss_mib"] > report["rss_before_mib"] > 0
    assert report["seconds_per_iter"][0] > 0
