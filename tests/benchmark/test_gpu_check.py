"""tools/gpu_check.sh and its report (hamseg.benchmark.gpu_check), here without CUDA."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch

from hamseg.benchmark.gpu_check import collect, markdown, write_report
from tests.conftest import REPO

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.gpu.test_cuda_paths" name="test_a" time="1.5"/>
<testcase classname="tests.gpu.test_cuda_paths" name="test_b" time="0.2">
<failure message="AssertionError: 1 != 2">trace</failure></testcase>
<testcase classname="tests.gpu.test_cuda_training" name="test_c" time="0.0">
<skipped message="CUDA is not available"/></testcase>
</testsuite></testsuites>"""


def test_report_collects_tests_numbers_steps_and_benchmarks(tmp_path):
    (tmp_path / "pytest.xml").write_text(JUNIT)
    (tmp_path / "test_ham_voc_train.json").write_text(json.dumps({"s_per_iter": 0.41}))
    (tmp_path / "steps.json").write_text(
        json.dumps([{"command": "python -m pytest -m gpu", "exit_code": 1, "seconds": 12}])
    )
    os.makedirs(tmp_path / "model")
    (tmp_path / "model" / "benchmark_model.json").write_text(json.dumps({"rows": [1]}))
    report = collect(str(tmp_path))
    assert [(t["name"].split("::")[1], t["outcome"]) for t in report["tests"]] == [
        ("test_a", "passed"),
        ("test_b", "failed"),
        ("test_c", "skipped"),
    ]
    assert report["tests"][1]["message"] == "AssertionError: 1 != 2"
    assert report["recorded"] == {"ham_voc_train": {"s_per_iter": 0.41}}
    assert report["benchmarks"] == {"model/benchmark_model.json": {"rows": [1]}}
    assert report["machine"]["torch"] == torch.__version__
    md = markdown(report)
    assert "## GPU tests: 1 passed, 1 failed, 1 skipped" in md
    assert "| `python -m pytest -m gpu` | 1 | 12 |" in md
    js, out = write_report(str(tmp_path))
    assert json.load(open(js))["tests"] == report["tests"] and open(out).read() == md


def test_gpu_check_without_cuda_says_so_and_runs_nothing(tmp_path):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHON=sys.executable)
    proc = subprocess.run(
        ["bash", "tools/gpu_check.sh"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0
    assert proc.stdout == "no CUDA device: nothing to check\n"
    assert not os.path.exists(os.path.join(REPO, "work_dirs", "gpu_check", "report.md")) or (
        torch.cuda.is_available()
    )
