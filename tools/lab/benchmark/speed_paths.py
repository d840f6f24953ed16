"""A/B of the Hamburger's speed paths (docs/benchmark.md), each on and off, alternating:
``PointwiseConv.enabled`` (1x1 convs as one product per sample) and ``fast_path_min_positions``
(inference through the ham's factors, ``(W D) C``)."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from hamseg.models import Hamburger
from hamseg.models.fused_hamburger import PointwiseConv

from .measure import alternate, spread, table


@contextmanager
def _paths(block: Hamburger, pointwise: bool, fused: bool) -> Iterator[None]:
    saved = PointwiseConv.enabled, block.fast_path_min_positions
    threshold = Hamburger.fast_path_min_positions if fused else None  # the class default
    PointwiseConv.enabled = pointwise
    block.fast_path_min_positions = threshold
    try:
        yield
    finally:
        PointwiseConv.enabled, block.fast_path_min_positions = saved


def _time(variant: str, mode: str, x: torch.Tensor, runs: int) -> dict[str, list[float]]:
    block = Hamburger(x.shape[1], ham_cfg=dict(type="NMF", R=64), variant=variant)
    block.train(mode != "infer")
    x = x.clone().requires_grad_(mode != "infer")

    def call(pointwise: bool, fused: bool) -> None:
        with _paths(block, pointwise, fused), torch.set_grad_enabled(mode != "infer"):
            y = block(x)
            if mode != "infer":
                y.sum().backward()

    cases = {"both off": (False, False), "PointwiseConv": (True, False)}
    if mode == "infer":  # the fused path is an inference path
        cases.update({"fused": (False, True), "both on": (True, True)})
    return alternate({k: (lambda a=a: call(*a)) for k, a in cases.items()}, x.device, runs)


def speed_paths(shape: tuple[int, ...] = (1, 512, 128, 128), runs: int = 7) -> list[dict]:
    """Median, spread, ratio to both off of NMF Hamburgers (r=64, K=6): inference of the paper and
    release blocks, fwd+bwd of the paper block (the fused path is inference only)."""
    torch.manual_seed(0)
    x = torch.rand(*shape)
    rows = []
    for variant, mode in (("paper", "infer"), ("release", "infer"), ("paper", "fwd+bwd")):
        times = _time(variant, mode, x, runs)
        base = statistics.median(times["both off"])
        for name, ts in times.items():
            med = statistics.median(ts)
            rows.append(
                dict(
                    variant=variant,
                    mode=mode,
                    paths=name,
                    ms=1e3 * med,
                    ratio=med / base,
                    spread=spread(ts),
                )
            )
    return rows


def speed_paths_markdown(rows: list[dict[str, Any]], header: str) -> str:
    """The rows of :func:`speed_paths` as a markdown table under ``header``."""
    cells = [
        (
            r["variant"],
            r["mode"],
            r["paths"],
            f"{r['ms']:.1f} ms",
            f"**{r['ratio']:.2f}x**",
            f"{100 * r['spread']:.0f}%",
        )
        for r in rows
    ]
    cols = ("block", "call", "paths on", "median", "x both off", "spread")
    return "\n".join([header, "", *table(cols, cells)]) + "\n"
