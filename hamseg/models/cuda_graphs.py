"""The hams' inference on CUDA replayed as CUDA graphs (docs/gpu.md, "What hamseg does for you").

A ham's K iterations are ~80 small kernels; on a GPU their launches, not their arithmetic, bound
an eval forward. :func:`replay` captures the ham's forward once per input shape and then copies
the input in, replays the captured kernels and copies the output out. The kernels are the eager
ones, so outputs equal the eager path's; a random dictionary (the global generator) is drawn
afresh at every replay. Where capture cannot work, the eager path runs (:func:`applies`).
"""

from __future__ import annotations

import contextlib
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor, nn

from hamseg.models.tracing import is_tracing

__all__ = ["CAPACITY", "applies", "disabled", "enabled", "replay"]

#: Graphs kept per ham (one per input shape, dtype and configuration), least recently used out.
#: The 12 views of the multi-scale + flip test need 12.
CAPACITY = 16
#: The switch: False runs every ham eagerly.
enabled = True

_graphs: weakref.WeakKeyDictionary[nn.Module, OrderedDict] = weakref.WeakKeyDictionary()


def applies(ham: nn.Module, x: Tensor, bases: Tensor | None) -> bool:
    """Whether ``ham(x, bases)`` runs as a replayed graph: :data:`enabled`, a ham that can be
    captured (``ham.graphable``), eval mode, no autograd, a CUDA input, the ham's own initial
    dictionary, no trace, compilation or capture in progress, and no seeded draw of codes (a
    seeded generator is not the graph's)."""
    return (
        enabled
        and getattr(ham, "graphable", False)
        and x.is_cuda
        and not ham.training
        and bases is None
        and not torch.is_grad_enabled()
        and not is_tracing()
        and not torch.compiler.is_compiling()
        and not torch.cuda.is_current_stream_capturing()
        and not (ham.eval_seed is not None and ham.random_codes)
    )


def _key(ham: nn.Module, x: Tensor) -> tuple:
    """What a graph depends on: the input's shape, strides, dtype and device, the ham's settings,
    and where its dictionary buffer lives (``init`` 'fixed', 'online', 'learned')."""
    where = None if ham.bases is None else (ham.bases.data_ptr(), ham.bases.dtype)
    return (tuple(x.shape), x.stride(), x.dtype, x.device, ham.extra_repr(), where)


def _capture(ham: nn.Module, x: Tensor, eager: Any) -> tuple:
    """A graph of ``eager(static input)``: three warm-up calls on a side stream (they also fill
    the ham's caches, e.g. the seeded dictionary), then the capture."""
    static_in = x.clone()
    stream = torch.cuda.Stream(x.device)
    stream.wait_stream(torch.cuda.current_stream(x.device))
    with torch.cuda.stream(stream):
        for _ in range(3):
            eager(static_in)
    torch.cuda.current_stream(x.device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = eager(static_in)
    # keep what the kernels read alive: a replaced seeded dictionary must not free their memory
    keep = (ham.seeded_dictionary, ham.bases)
    return graph, static_in, static_out, keep


def replay(ham: nn.Module, x: Tensor, eager: Any) -> Tensor:
    """``eager(x)`` (the ham's eager forward) through the graph captured for ``x``'s key; if
    the capture fails, a warning and the eager forward for that key from then on."""
    cache = _graphs.setdefault(ham, OrderedDict())
    key = _key(ham, x)
    if key not in cache:
        try:
            cache[key] = _capture(ham, x, eager)
        except RuntimeError as err:
            cache[key] = None
            reason = " ".join(str(err).split())[:200]
            warnings.warn(f"{type(ham).__name__}: no CUDA graph ({reason}); eager", stacklevel=3)
        while len(cache) > CAPACITY:
            cache.popitem(last=False)
    cache.move_to_end(key)
    if cache[key] is None:
        return eager(x)
    graph, static_in, static_out, _ = cache[key]
    static_in.copy_(x)
    graph.replay()
    return static_out.clone()


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Every ham eager within the block (e.g. to count the operators a forward runs)."""
    global enabled
    saved = enabled
    enabled = False
    try:
        yield
    finally:
        enabled = saved
