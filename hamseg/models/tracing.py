"""Tracing and export: when the hams must take plain out-of-place ops, and drawing a constant.

``torch.jit.trace`` (which mmengine's FLOP counter and the TorchScript ONNX exporter use) and
``torch.export`` (the dynamo ONNX exporter) record operators: the hams' in-place steps with
``out=`` buffers are recorded with their extra argument (mmengine's ``bmm_flop_jit`` then asserts;
exporters may reject them), and a seeded random draw is recorded as a random operator, so the
traced graph draws a new dictionary at every call. :func:`is_tracing` is the one condition the
models test; :func:`outside_trace` computes a tensor that the trace records as a constant.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["is_tracing", "outside_trace"]


def is_tracing() -> bool:
    """True while ``torch.jit.trace``, ``torch.onnx.export`` or ``torch.export`` records."""
    if torch.jit.is_tracing() or torch.onnx.is_in_onnx_export():
        return True
    compiler = getattr(torch, "compiler", None)
    return bool(compiler is not None and compiler.is_exporting())


@contextlib.contextmanager
def outside_trace() -> Iterator[None]:
    """Run the body unrecorded by ``torch.jit.trace``: tensors it creates are constants of the
    trace (a no-op when nothing traces)."""
    state = torch._C._get_tracing_state()
    if state is None:
        yield
        return
    torch._C._set_tracing_state(None)
    try:
        yield
    finally:
        torch._C._set_tracing_state(state)
