"""CPU latency of a segmentor in PyTorch eager vs its ONNX export in ONNX Runtime.

Each model is built with random weights (``build_for_training``'s recipe: no pretrained
download, SyncBN reverted), put in eval mode with a seeded dictionary, exported
(:func:`hamseg.apis.export.export_onnx`) and timed on the same input: ``encode_decode`` in eager
PyTorch under ``no_grad`` and the ONNX Runtime session, alternating run by run, median of N.
"""

from __future__ import annotations

import os.path as osp
import statistics
import tempfile
import time
from typing import Any

import torch

from hamseg.apis.export import export_onnx, onnx_session

from .training import build_for_training, resolve

__all__ = ["DEFAULT_CASES", "as_json", "latency", "markdown"]

#: (label, config, input size): the demo model and the VOC recipe's model.
DEFAULT_CASES = [
    ("demo HamHead-NMF", "configs/demo/hamhead-nmf_r18-d8_context-shapes.py", 128),
    ("configs/ham_voc.py", "configs/ham_voc.py", 513),
]


def latency(config: str, size: int, runs: int = 10, threads: int = 0) -> dict[str, Any]:
    """Median seconds of one 1x3xSxS inference, eager vs ONNX Runtime, and their ratio."""
    model, _, _ = build_for_training(resolve(config), size, torch.device("cpu"))
    model.eval()
    with tempfile.TemporaryDirectory() as tmp:
        path = osp.join(tmp, "model.onnx")
        exported = export_onnx(model, path, (size, size), seed=0)
        session = onnx_session(path, threads)
        x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(0))
        feed = {"input": x.numpy()}
        times: dict[str, list[float]] = {"eager": [], "onnxruntime": []}
        with torch.no_grad():
            exported(x), session.run(None, feed)  # warm-up
            for _ in range(runs):
                t = time.perf_counter()
                exported(x)
                times["eager"].append(time.perf_counter() - t)
                t = time.perf_counter()
                session.run(None, feed)
                times["onnxruntime"].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    spread = max((max(v) - min(v)) / statistics.median(v) for v in times.values())
    return dict(
        eager=med["eager"], onnxruntime=med["onnxruntime"], ratio=med["onnxruntime"] / med["eager"],
        spread=spread, runs=runs, size=size,
    )  # fmt: skip


def as_json(rows: list[tuple[str, dict[str, Any]]], threads: int = 0) -> dict[str, Any]:
    """The measured rows as the benchmark's JSON output: every :func:`latency` number (seconds)
    under its model's label, and ONNX Runtime's thread setting (0: its default)."""
    return dict(rows=[dict(label=label, **r) for label, r in rows], threads=threads, device="cpu")


def markdown(rows: list[tuple[str, dict[str, Any]]]) -> str:
    """A markdown table of the rows: median latencies (ms), their ratio and spread."""
    lines = [
        "| model | input | PyTorch eager | ONNX Runtime | ORT / eager | spread |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for label, r in rows:
        lines.append(
            f"| {label} | 1x3x{r['size']}x{r['size']} | {r['eager'] * 1e3:.1f} ms "
            f"| {r['onnxruntime'] * 1e3:.1f} ms | **{r['ratio']:.2f}x** "
            f"| {r['spread'] * 100:.0f}% |"
        )
    return (
        "\n".join(lines) + f"\n\nMedian of {rows[0][1]['runs']} alternating runs; spread: "
        "(max - min) / median, the larger of the two.\n"
    )
