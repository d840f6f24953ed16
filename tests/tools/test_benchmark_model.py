"""tools/analysis_tools/benchmark_model.py as a script: paired A/B of whole models, JSON out."""

import json
import os.path as osp
import subprocess
import sys

from tests.conftest import REPO

TOOL = osp.join(REPO, "tools", "analysis_tools", "benchmark_model.py")
DEMO = osp.join(REPO, "configs", "demo", "hamhead-nmf_r18-d8_context-shapes.py")


def run(*args):
    cmd = [sys.executable, TOOL, DEMO, *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)


def test_pairs_a_config_with_its_overridden_self_and_writes_json(tmp_path):
    out = tmp_path / "b.json"
    options = ["--vs-options", "model.decode_head.ham_cfg.eval_draws=1", "--out", str(out)]
    proc = run("--size", "33", "41", "--pairs", "3", "--warmup", "0", "--threads", "1", *options)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["size"] == [33, 41] and result["mode"] == "infer" and result["pairs"] == 3
    for clock in ("wall", "cpu"):
        ratio = result[f"ratio_{clock}"]
        assert 0 < ratio["min"] <= ratio["median"] <= ratio["max"]
        assert result["A"][f"{clock}_ms"]["median"] > 0 and result["B"][f"{clock}_ms"]["min"] > 0


def test_bad_size_is_one_line_and_exit_2():
    proc = run("--size", "0")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "--size" in line
