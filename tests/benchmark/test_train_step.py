"""The train-step capture's CPU dry run (tools/analysis_tools/benchmark_train_step.py) and
tools/gpu_check.sh without CUDA."""

import json
import subprocess
import sys

from tests.conftest import REPO


def test_dry_run_times_two_iterations_and_writes_json(tmp_path):
    out = tmp_path / "step.json"
    config = "configs/demo/hamhead-nmf_r18-d8_context-shapes.py"
    cmd = [sys.executable, "tools/analysis_tools/benchmark_train_step.py", config, "--dry-run"]
    proc = subprocess.run(
        [*cmd, "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert (result["device"], result["batch"], result["size"]) == ("cpu", 1, 64)
    assert len(result["eager_ms"]) == len(result["compiled_ms"]) == 2 and result["busy_ms"] > 0
    assert result["eager_median_ms"] > 0 and "compile_error" not in result


def test_gpu_check_without_cuda_says_so_and_runs_nothing(tmp_path):
    env = {"CUDA_VISIBLE_DEVICES": "", "OUT": str(tmp_path / "out"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        ["bash", "tools/gpu_check.sh"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "PYTHON": sys.executable},
    )
    assert proc.returncode == 0 and "no CUDA device" in proc.stdout
    assert not (tmp_path / "out").exists()
