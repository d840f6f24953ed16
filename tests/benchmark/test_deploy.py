"""tools/deploy/benchmark_onnx.py (latency of graphs in turn, JSON with the CPU's instruction
sets) and docs/deploy.md's onnxruntime snippet, run verbatim."""

from __future__ import annotations

import json
import os.path as osp
import re
import shutil
import subprocess
import sys

import cv2
import numpy as np
import pytest

from hamseg.apis import init_model
from hamseg.apis.export import export_onnx
from tests.apis.test_export import (
    NO_TORCH,
    RUNNER,
    run,
    tiny_checkpoint,
    tiny_config,
    tool,
    write_images,
)
from tests.conftest import REPO
from tests.helpers import make_checkpoint, one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def graphs(tmp_path_factory, one_thread) -> dict:  # noqa: F811
    """The tiny model without the test Resize, exported dynamic and static (48x64)."""
    tmp = tmp_path_factory.mktemp("bench")
    pipeline = [dict(type="LoadImageFromFile"), dict(type="PackSegInputs")]
    config = tiny_config(str(tmp / "cfg.py"), test_pipeline=pipeline)
    model = init_model(config, tiny_checkpoint(str(tmp / "m.pth")), "cpu")
    files = dict(dynamic=str(tmp / "dynamic.onnx"), static=str(tmp / "static.onnx"))
    export_onnx(model, files["dynamic"], (48, 64))
    export_onnx(model, files["static"], (48, 64), dynamic=False)
    return dict(files, tmp=tmp, config=config)


def test_the_benchmark_times_graphs_in_turn_and_names_the_cpu(graphs):
    out = graphs["tmp"] / "bench.json"
    args = [graphs["dynamic"], graphs["static"], "--shape", "48", "64", "--runs", "3"]
    proc = run("-c", NO_TORCH, "tools/deploy/benchmark_onnx.py", *args, "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert [r["model"] for r in rows] == [graphs["dynamic"], graphs["static"]]
    assert rows[0]["ratio"] == rows[0]["cpu_ratio"] == 1
    for r in rows:
        assert r["min_ms"] <= r["ms"] <= r["max_ms"] and r["cpu_ms"] > 0
        assert r["ratio"] == pytest.approx(r["ms"] / rows[0]["ms"])
        assert f"{r['model']}: {r['ms']:.1f} ms" in proc.stdout
    assert result["runs"] == 3 and result["shape"] == [48, 64] and result["threads"] == 1
    if osp.isfile("/proc/cpuinfo"):
        flags = open("/proc/cpuinfo").read().split()
        assert result["cpu"]["flags"] == [f for f in result["cpu"]["flags"] if f in flags]
        assert ("avx2" in result["cpu"]["flags"]) == ("avx2" in flags) and result["cpu"]["name"]


def test_the_snippet_of_docs_deploy_runs_verbatim(graphs, tmp_path, monkeypatch, capsys):
    """The <= 10-line onnxruntime example gives the runner's label map on a 45x61 image, and
    so does tools/infer.py --backend onnxruntime, byte for byte (no test-time resize here)."""
    with open(osp.join(REPO, "docs", "deploy.md")) as f:
        page = f.read()
    snippet = re.search(r"## Your own code.*?```python\n(.*?)```", page, re.S).group(1)
    assert len(snippet.strip().splitlines()) <= 10
    shutil.copy(graphs["dynamic"], tmp_path / "model.onnx")
    write_images(str(tmp_path), [(45, 61)])
    shutil.move(tmp_path / "0.png", tmp_path / "image.png")
    (tmp_path / "snippet.py").write_text(snippet)
    cmd = [sys.executable, "-c", NO_TORCH, "snippet.py"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    model, image, out = (str(tmp_path / name) for name in ("model.onnx", "image.png", "runner"))
    runner = run(RUNNER, model, image, "--out-dir", out)
    assert runner.returncode == 0, runner.stderr[-2000:]
    ours = cv2.imread(str(tmp_path / "label.png"), cv2.IMREAD_UNCHANGED)
    theirs = cv2.imread(str(tmp_path / "runner" / "image_label.png"), cv2.IMREAD_UNCHANGED)
    assert ours.shape == (45, 61) and np.array_equal(ours, theirs)
    args = [str(tmp_path / "image.png"), "--config", graphs["config"], "--backend", "onnxruntime"]
    args += ["--model", str(tmp_path / "model.onnx"), "--out-dir", str(tmp_path / "infer")]
    infer = tool("tools/infer.py", *args, "--save-label", monkeypatch=monkeypatch, capsys=capsys)
    assert infer.returncode == 0, infer.stderr[-2000:]
    label = tmp_path / "infer" / "image_label.png"
    assert label.read_bytes() == (tmp_path / "runner" / "image_label.png").read_bytes()
