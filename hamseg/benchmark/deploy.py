"""CPU latency of a segmentor in PyTorch eager vs its ONNX export in ONNX Runtime (docs/deploy.md).

Random weights (:func:`~hamseg.benchmark.models.build_for_training`), eval mode, a seeded
dictionary (:func:`hamseg.apis.export.export_onnx`); each backend is one entry of a dict of
calls timed alternately on the same input (:func:`~hamseg.benchmark.measure.alternate`).
"""

from __future__ import annotations

import os.path as osp
import statistics
import tempfile
from typing import Any

import torch

from hamseg.apis.export import export_onnx, onnx_session

from .measure import alternate, spread
from .models import build_for_training, resolve

#: (label, config, input size): the demo model and the VOC recipe's model.
DEFAULT_CASES = [
    ("demo HamHead-NMF", "configs/demo/hamhead-nmf_r18-d8_context-shapes.py", 128),
    ("configs/ham_voc.py", "configs/ham_voc.py", 513),
]


def latency(config: str, size: int, runs: int = 10, threads: int = 0) -> dict[str, Any]:
    """Median seconds of one 1x3xSxS inference, eager and ONNX Runtime (``threads`` intra-op
    threads, 0: its default), their ratio and the larger spread of the two."""
    model, _, model.cfg = build_for_training(resolve(config), size, torch.device("cpu"))
    model.eval()
    x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(0))
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        exported = export_onnx(model, osp.join(tmp, "model.onnx"), (size, size), seed=0)
        session = onnx_session(osp.join(tmp, "model.onnx"), threads)
        feed = {"input": x.numpy()}
        backends = {"eager": lambda: exported(x), "onnxruntime": lambda: session.run(None, feed)}
        times = alternate(backends, torch.device("cpu"), runs)
    med = {k: statistics.median(v) for k, v in times.items()}
    return dict(
        eager=med["eager"], onnxruntime=med["onnxruntime"], ratio=med["onnxruntime"] / med["eager"],
        spread=max(map(spread, times.values())), runs=runs, size=size,
    )  # fmt: skip


def as_json(rows: list[tuple[str, dict[str, Any]]], threads: int = 0) -> dict[str, Any]:
    """The rows as the benchmark's JSON: every :func:`latency` number under its label, and ONNX
    Runtime's thread setting (0: its default)."""
    return dict(rows=[dict(label=label, **r) for label, r in rows], threads=threads, device="cpu")


def markdown(rows: list[tuple[str, dict[str, Any]]]) -> str:
    """A markdown table of the rows: median latencies (ms), their ratio and spread."""
    lines = [
        "| model | input | PyTorch eager | ONNX Runtime | ORT / eager | spread |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {label} | 1x3x{r['size']}x{r['size']} | {r['eager'] * 1e3:.1f} ms "
        f"| {r['onnxruntime'] * 1e3:.1f} ms | **{r['ratio']:.2f}x** | {r['spread'] * 100:.0f}% |"
        for label, r in rows
    ]
    return (
        "\n".join(lines) + f"\n\nMedian of {rows[0][1]['runs']} alternating runs; spread: "
        "(max - min) / median, the larger of the two.\n"
    )
