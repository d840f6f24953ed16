"""hamseg.benchmark.deploy: eager vs ONNX Runtime latency, consistent numbers."""

from __future__ import annotations

import pytest

from tests.helpers import one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_deploy_latency_of_the_demo_model():
    from hamseg.benchmark.deploy import latency, markdown

    r = latency("configs/demo/hamhead-nmf_r18-d8_context-shapes.py", 64, runs=2)
    assert r["ratio"] == pytest.approx(r["onnxruntime"] / r["eager"]) and r["eager"] > 0
    assert r["runs"] == 2 and r["spread"] >= 0
    assert "| demo | 1x3x64x64 |" in markdown([("demo", r)])
