"""One real training iteration of the full ResNet-101 ham_voc model at 513x513 on CPU (slow).

Runs tools/benchmark_train_iter.py in a fresh process (so that its peak RSS is the iteration's)
and prints the time and peak memory (visible with ``pytest -s`` or ``-rP``); docs/recipes.md
records a measured run.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_full_size_train_iteration(tmp_path):
    out = tmp_path / "bench.json"
    cmd = [sys.executable, os.path.join(REPO, "tools", "benchmark_train_iter.py"),
           "configs/ham_voc.py", "--size", "513", "--iters", "1", "--out", str(out)]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=3600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    print("\n" + result.stdout)
    assert (report["batch_size"], report["size"], report["iters"]) == (2, 513, 1)
    assert report["params_m"] == pytest.approx(54.04, abs=0.01)  # R101 deep stem + HamHead V2
    loss = report["loss"][0]
    assert math.isfinite(loss) and abs(loss - math.log(21)) < 1.0  # random init, 21 classes
    assert report["peak_rss_mib"] > report["rss_before_mib"] > 0
    assert report["seconds_per_iter"][0] > 0
