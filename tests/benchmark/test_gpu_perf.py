"""tools/benchmark_gpu.py on the CPU at tiny sizes (docs/gpu.md runs it on a GPU): every part
writes rows whose numbers agree with each other."""

from __future__ import annotations

import json
import math

import pytest
import torch

from tests.benchmark.tools import run_tool
from tools.lab.benchmark.gpu_perf import IterationBench, Switches, family

DEMO = "configs/demo/hamhead-nmf_r18-d8_context-shapes.py"


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("gpu_perf")
    args = ["--device", "cpu", "--config", DEMO, "--precisions", "fp32", "--size", "33"]
    args += ["--iters", "1", "--rounds", "2", "--shape", "1", "32", "16", "16"]
    args += ["--head-shape", "2", "32", "9", "11", "--runs", "2", "--image", "40", "50"]
    run_tool("benchmark_gpu.py", *args, "--out-dir", str(out))
    parts = ("iterations", "profile", "hamburger", "msflip")
    return {p: json.loads((out / f"{p}.json").read_text())["rows"] for p in parts}


def test_iterations_before_and_as_shipped(measured):
    rows = measured["iterations"]
    assert [r["switches"]["channels_last"] for r in rows] == [False, False, True]
    assert rows[0]["switches"]["pointwise"] is True  # before [gpu]: PointwiseConv on CUDA too
    for r in rows:
        assert len(r["iter_s"]) == 2 and len(r["round_ms"]) == 2  # one timed step per round
        assert r["head_ms"] > 0 and r["iter_ms"] > 0 and math.isfinite(r["loss"])
        assert r["head_share"] == pytest.approx(r["head_ms"] / r["iter_ms"])
    assert rows[0]["speedup_vs_first"] == 1.0


def test_profile_families_add_up_to_the_busy_time(measured):
    for row in measured["profile"]:
        assert sum(row["families"].values()) == pytest.approx(row["busy_ms"], rel=1e-6)
        assert sum(t["share"] for t in row["top"]) <= 1 + 1e-9
        assert 0 < row["busy_ms"] and row["kernel_time"] == "cpu"


def test_hamburger_rows_are_relative_to_their_references(measured):
    rows = measured["hamburger"]
    assert rows["inference"][0]["label"].startswith("mmseg") and rows["inference"][0][
        "ratio_to_mmseg"
    ] == pytest.approx(1.0)
    assert len(rows["inference"]) == 7 and all(r["ms"] > 0 for r in rows["inference"])
    one = [r for r in rows["draws_table3"] if r["label"] == "1 seeded draw"]
    assert len(one) == 4 and all(r["ratio_to_one"] == 1.0 for r in one)
    assert len(rows["train_head"]) == 6


def test_msflip_rows_time_every_view(measured):
    rows = measured["msflip"]
    views = rows[0]["views"]  # the demo's: 3 scales x 2 flips
    assert [(r["label"], r["draws"], r["views"]) for r in rows] == [
        ("fp32, NCHW", 1, views),
        ("fp32, NCHW", 12, views),
        ("fp32, channels_last", 1, views),
        ("fp32, channels_last", 12, views),
    ]
    assert views == 6
    assert all(r["s_per_image"] > 0 for r in rows)


def test_labels_and_operator_families():
    assert Switches().label == "fp32, NCHW"
    label = Switches("bf16", channels_last=True, loss_scale=False, pointwise=True).label
    assert label == "bf16, channels_last, no loss scaler, PointwiseConv everywhere"
    assert family("aten::cudnn_convolution") == "convolution"
    assert family("aten::_foreach_add_") == "optimizer"
    assert family("aten::relu_") == "other"


def test_each_layout_keeps_optimizer_state_of_its_own_layout():
    """A channels_last variant, then NCHW ones with and without the fused kernel: every
    variant's optimizer state (the demo's AdamW moments; SGD's momentum in the recipes) has its
    weights' memory format (shared state made the fused SGD kernel refuse NCHW weights with
    channels_last buffers on CUDA)."""
    bench = IterationBench(DEMO, 1, 33, torch.device("cpu"))
    variants = [
        Switches("fp32", channels_last=True),
        Switches("fp32"),
        Switches("fp32", fused_sgd=True),
    ]
    for s in variants:
        bench.measure(s, iters=1, warmup=1)
    for s in variants:
        fmt = torch.channels_last if s.channels_last else torch.contiguous_format
        state = bench.wrapper(s).optimizer.state
        convs = [p for p in bench.model.parameters() if p.dim() == 4 and p in state]
        assert len(convs) > 10
        for p in convs:
            buffers = [v for v in state[p].values() if torch.is_tensor(v) and v.shape == p.shape]
            assert buffers, s.label
            assert all(b.is_contiguous(memory_format=fmt) for b in buffers), s.label
