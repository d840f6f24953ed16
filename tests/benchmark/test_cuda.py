"""The CUDA path of the benchmark: CUDA-event timings and the allocator's peak (GPU only)."""

from __future__ import annotations

import json

import pytest
import torch

from tests.benchmark.tools import run_tool
from tools.lab.benchmark.measure import MIB, peak_memory, time_fn

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def test_cuda_events_time_the_kernels():
    """Eight 2048^3 fp32 matmuls (137 GFLOP) take at least 0.14 ms even at 1000 TFLOP/s: the
    events bracket the kernels, not only their asynchronous launch."""
    device = torch.device("cuda")
    a = torch.randn(2048, 2048, device=device)
    out = torch.empty_like(a)
    work = lambda: [torch.mm(a, a, out=out) for _ in range(8)]  # noqa: E731
    times = time_fn(work, device, runs=3, warmup=1, budget=1e9)
    assert len(times) == 3 and all(8 * 2 * 2048**3 / 1e15 < t < 10 for t in times)


def test_peak_memory_is_the_allocator_peak():
    device = torch.device("cuda")

    def work():
        a = torch.ones(2 * MIB, device=device)  # 8 MiB, freed before b is allocated
        del a
        b = torch.ones(MIB // 2, device=device)  # 2 MiB
        return b.sum()

    assert 8 * MIB <= peak_memory(work, device) < 9 * MIB


def test_table_mode_on_cuda(tmp_path):
    args = ["--device", "cuda", "--shape", "1", "16", "33", "33", "--rank", "4", "--steps", "2"]
    args += ["--runs", "2", "--warmup", "1", "--rate-size", "256", "--out-dir", str(tmp_path)]
    run_tool("benchmark_context.py", *args, "--modules", "ham_nmf", "mmseg_ham", "sa")
    saved = json.loads((tmp_path / "benchmark_context.json").read_text())
    assert saved["env"]["device"] == "cuda"
    for row in saved["rows"]:
        assert row["infer_ms"] > 0 and row["train_ms"] > 0 and row["train_mem_mb"] > 0
    assert saved["rows"][0]["macs_run"] == saved["rows"][0]["macs_run_hand"]
