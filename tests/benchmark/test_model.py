"""tools/benchmark_model.py on tiny configs, in a fresh process: rows, ratios, files."""

from __future__ import annotations

import json
import os.path as osp
import subprocess
import sys

from hamseg.benchmark.model import HAM, default_label
from tests.benchmark.tools import run_tool
from tests.conftest import REPO


def test_model_benchmark_reports_the_ratio(tmp_path):
    configs = ["tests/data/tiny_ham.py", "tests/data/tiny_fcn.py"]
    args = ["--configs", *configs, "--labels", "ham", "fcn", "--size", "33", "--iters", "1"]
    printed = run_tool("benchmark_model.py", *args, "--warmup", "0", "--out-dir", str(tmp_path))
    result = json.loads((tmp_path / "benchmark_model.json").read_text())
    rows = result["rows"]
    assert [r["label"] for r in rows] == ["ham", "fcn"]
    assert rows[0]["ratio_to_first"] == 1.0
    assert rows[1]["ratio_to_first"] == rows[1]["iter_s"] / rows[0]["iter_s"]
    assert all(r["peak_mem_mb"] > 0 and r["params"] > 0 for r in rows)
    assert result["env"]["size"] == 33 and len(result["rows"]) == 2
    text = (tmp_path / "benchmark_model.md").read_text()
    assert "| ham |" in text and text in printed.stdout
    base = tmp_path / "benchmark_model"
    assert printed.stdout.rstrip().endswith(f"[benchmark_model] wrote {base}.md, {base}.json")


def test_default_labels():
    assert default_label(HAM) == "HamNet (HamHead NMF)"
    assert default_label("mmseg::nonlocal_net/nonlocal_r101-d8.py") == "nonlocal_r101-d8"


def test_a_missing_config_is_one_line_before_any_measurement(tmp_path):
    missing = str(tmp_path / "nope.py")
    cmd = [sys.executable, osp.join(REPO, "tools", "benchmark_model.py"), "--configs"]
    cmd += ["tests/data/tiny_ham.py", missing, "--out-dir", str(tmp_path / "out")]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: config file not found: {missing}"
    assert "[benchmark_model]" not in result.stdout and not (tmp_path / "out").exists()
