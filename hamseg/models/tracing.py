"""Tracing and export: when the models take the recorded (module-call) path, and constants.

``torch.jit.trace`` (mmengine's FLOP counter, the TorchScript ONNX exporter) and ``torch.export``
record operators: :func:`is_tracing` is the condition the models test; :func:`outside_trace`
computes a tensor (the seeded dictionary) that a trace records as a constant, not a random draw.
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
