"""When a trace records the models (``torch.jit.trace``, ``torch.onnx.export``, ``torch.export``),
and how to compute a constant of the trace (the seeded dictionary) rather than record a draw."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["is_tracing", "outside_trace"]


def is_tracing() -> bool:
    """True while ``torch.jit.trace``, ``torch.onnx.export`` or ``torch.export`` records."""
    exporting = getattr(torch.compiler, "is_exporting", None)  # torch >= 2.7
    return (
        torch.jit.is_tracing() or torch.onnx.is_in_onnx_export() or bool(exporting and exporting())
    )


@contextlib.contextmanager
def outside_trace() -> Iterator[None]:
    """Run the body unrecorded by ``torch.jit.trace`` (its tensors become constants)."""
    state = torch._C._get_tracing_state()
    torch._C._set_tracing_state(None)
    try:
        yield
    finally:
        torch._C._set_tracing_state(state)
