"""tools/gpu_check.sh and its report (tools.lab.benchmark.gpu_check), here without CUDA."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from hamseg.apis.demo import ensure_data
from tests.benchmark.tools import run_tool
from tests.conftest import REPO
from tools.lab.benchmark.gpu_check import collect, flatten, markdown, write_report

PYTEST_TESTS = """import pytest

def test_a():
    pass

def test_b():
    assert 1 == 2, "one is not two"

@pytest.mark.skip(reason="CUDA is not available")
def test_c():
    pass

@pytest.mark.parametrize("k", ["a b"])
def test_d(k):
    pass
"""


def _pytest_output(tmp_path) -> str:
    """pytest's own ``-v -rfE`` output of a pass, a failure, a skip and a parametrised test, as
    gpu_check.sh saves it (pytest.txt)."""
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "test_gpu_cases.py").write_text(PYTEST_TESTS)
    cmd = [sys.executable, "-m", "pytest", "-v", "-rfE", "-p", "no:cacheprovider", "cases"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:]
    return proc.stdout


def test_report_collects_tests_numbers_steps_and_benchmarks(tmp_path):
    (tmp_path / "pytest.txt").write_text(_pytest_output(tmp_path))
    (tmp_path / "test_ham_voc_train.json").write_text(json.dumps({"s_per_iter": 0.41}))
    (tmp_path / "steps.json").write_text(
        json.dumps([{"command": "python -m pytest -m gpu", "exit_code": 1, "seconds": 12}])
    )
    os.makedirs(tmp_path / "model")
    (tmp_path / "model" / "benchmark_model.json").write_text(json.dumps({"rows": [1]}))
    report = collect(str(tmp_path))
    assert [(t["name"], t["outcome"], t["message"]) for t in report["tests"]] == [
        ("cases/test_gpu_cases.py::test_a", "passed", ""),
        ("cases/test_gpu_cases.py::test_b", "failed", "AssertionError: one is not two"),
        ("cases/test_gpu_cases.py::test_c", "skipped", "CUDA is not available"),
        ("cases/test_gpu_cases.py::test_d[a b]", "passed", ""),
    ]
    assert report["recorded"] == {"ham_voc_train": {"s_per_iter": 0.41}}
    assert report["benchmarks"] == {"model/benchmark_model.json": {"rows": [1]}}
    assert report["tables"] == {}
    assert report["machine"]["torch"] == torch.__version__
    md = markdown(report)
    assert "## GPU tests: 2 passed, 1 failed, 1 skipped" in md
    assert "| cases/test_gpu_cases.py::test_c | skipped | CUDA is not available |" in md
    assert "| `python -m pytest -m gpu` | 1 | 12 |" in md
    js, out = write_report(str(tmp_path))
    assert json.load(open(js))["tests"] == report["tests"] and open(out).read() == md


def _fixtures() -> dict[str, tuple[dict, str]]:
    """One output of each benchmark gpu_check.sh runs, as each writes it: JSON and its table."""
    import runpy

    from tools.lab.benchmark import models

    context = {
        "env": {"device": "cuda", "rates": [1.5e12, 1.4e12], "shape": [1, 512, 128, 128]},
        "rows": [
            {"key": "ham_nmf", "infer_ms": 1.2345678, "macs_by_op": {"conv": 8589934592}},
            {"key": "ema", "infer_ms": 2.5, "train_mem_mb": 96.125},
        ],
    }
    model = {
        "env": {"size": 513, "batch": 2},
        "rows": [{"label": "HamNet", "iter_s": 0.683324039, "iter_s_all": [0.67, 0.69]}],
    }
    seg = dict(
        rows=[
            dict(
                part="decode head",
                time_ours=0.0421,
                time_mmseg=0.0512,
                time_ratio=0.8222656,
                spread=0.031,
                mem_ours=123456789,
                mem_mmseg=234567890,
                mem_ratio=0.5263,
            ),
        ],
        batch=2,
        size=512,
        runs=5,
        device="cuda:0",
    )
    latency = [
        dict(
            backend="ORT int8",
            threads=1,
            ms=12.3,
            min_ms=12.0,
            max_ms=13.0,
            ratio=0.2697,
            ratio_ort=0.5,
            cpu_ms=11.9,
            cpu_ratio_ort=0.48,
            runs=10,
            size=128,
            agreement=0.99,
            worst=0.9,
            miou=45.6,
            val_images=2,
        )
    ]
    deploy_markdown = runpy.run_path(f"{REPO}/tools/benchmark_deploy.py")["markdown"]
    return {
        "context/benchmark_context": (context, "| Module | Infer ms |\n|---|---:|\n| Ham | 1.2 |"),
        "model/benchmark_model": (model, "| model | s/iter |\n| --- | --- |\n| HamNet | 0.683 |"),
        "segnext/segnext": (seg, models.segnext_markdown(seg)),
        "deploy/deploy": (
            dict(rows={"demo HamHead-NMF": latency}, device="cpu"),
            deploy_markdown("demo HamHead-NMF", latency),
        ),
    }


def test_report_carries_every_number_of_every_benchmark(tmp_path):
    fixtures = _fixtures()
    for base, (numbers, table) in fixtures.items():
        os.makedirs(tmp_path / os.path.dirname(base), exist_ok=True)
        (tmp_path / f"{base}.json").write_text(json.dumps(numbers))
        (tmp_path / f"{base}.md").write_text(table)
    (tmp_path / "test_ham_voc_train.json").write_text(
        json.dumps({"s_per_iter": 0.41, "max_memory_allocated": 9876543210})
    )
    os.makedirs(tmp_path / "old")
    (tmp_path / "old" / "table_only.md").write_text("| a | b |\n| --- | --- |\n| x | 7.5 |")
    js, md = write_report(str(tmp_path))
    report, text = json.load(open(js)), open(md).read()
    assert report["benchmarks"] == {f"{b}.json": n for b, (n, _) in sorted(fixtures.items())}
    assert report["recorded"] == {
        "ham_voc_train": {"s_per_iter": 0.41, "max_memory_allocated": 9876543210}
    }
    for base, (numbers, table) in fixtures.items():
        assert f"### `{base}.json`" in text and table.strip() in text  # the benchmark's table
        leaves = flatten(numbers)
        assert f"every value of {base}.json ({len(leaves)})" in text
        for key, value in leaves:
            cell = value if isinstance(value, str) else json.dumps(value)
            assert f"| {key} | {cell} |" in text, (base, key)
    # spelled out, independently of flatten: nested keys, lists, full precision, each kind
    for row in [
        "| rows.0.infer_ms | 1.2345678 |",  # context
        "| rows.0.macs_by_op.conv | 8589934592 |",
        "| rows.1.train_mem_mb | 96.125 |",
        "| env.rates | [1500000000000.0, 1400000000000.0] |",
        "| rows.0.iter_s | 0.683324039 |",  # model
        "| rows.0.iter_s_all | [0.67, 0.69] |",
        "| rows.0.time_ratio | 0.8222656 |",  # segnext
        "| rows.0.mem_mmseg | 234567890 |",
        "| size | 512 |",
        "| rows.demo HamHead-NMF.0.ratio | 0.2697 |",  # deploy
        "| device | cpu |",
        "| s_per_iter | 0.41 |",  # recorded by a test
        "| max_memory_allocated | 9876543210 |",
    ]:
        assert row in text, row
    assert "every value of deploy/deploy.json (16)" in text  # 15 of the row, device
    assert "### `old/table_only.md` (no JSON next to it)" in text and "| x | 7.5 |" in text
    assert report["tables"]["old/table_only.md"].endswith("| x | 7.5 |")


@pytest.mark.slow
def test_the_benchmarks_write_the_json_the_report_reads(tmp_path):
    """The SegNeXt and ONNX Runtime benchmarks as gpu_check.sh runs them (--out-dir; on CPU
    here): every number they measured reaches report.json and report.md."""
    seg = ["--size", "64", "--batch", "1", "--runs", "1", "--out-dir", str(tmp_path / "segnext")]
    run_tool("benchmark_segnext.py", *seg)
    ensure_data(os.path.join(REPO, "data", "context_shapes"))  # the configs' val split
    args = ["--runs", "1", "--threads", "1", "--val-images", "2"]
    run_tool("benchmark_deploy.py", *args, "--out-dir", str(tmp_path / "deploy"))
    js, md = write_report(str(tmp_path))
    report, text = json.load(open(js)), open(md).read()
    seg = report["benchmarks"]["segnext/segnext.json"]
    deploy = report["benchmarks"]["deploy/deploy.json"]
    assert [r["part"] for r in seg["rows"]] == [
        "ham (NMF, r=16, 6 steps)",
        "decode head",
        "whole model, one iteration",
    ]
    assert list(deploy["rows"]) == ["demo HamHead-NMF", "SegNeXt-T (HamLightHead)"]
    backends = ["eager fp32", "ORT fp32", "ORT fp16", "ORT int8", "ORT int8-dynamic"]
    for rows in deploy["rows"].values():
        assert sorted(r["backend"] for r in rows) == sorted(backends)
        assert all(r["ms"] > 0 and r["threads"] == 1 and r["val_images"] == 2 for r in rows)
    assert all(r["time_ours"] > 0 and r["mem_mmseg"] > 0 for r in seg["rows"])
    for name, numbers in [("segnext/segnext", seg), ("deploy/deploy", deploy)]:
        assert report["tables"][f"{name}.md"].strip() in text
        for key, value in flatten(numbers):
            cell = value if isinstance(value, str) else json.dumps(value)
            assert f"| {key} | {cell} |" in text, (name, key)


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
