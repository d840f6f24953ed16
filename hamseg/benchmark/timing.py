"""Timing: median-ready wall times of a call, the machine's matmul rate, retries when disturbed.

:func:`time_fn` times ``runs`` calls after ``warmup`` calls and stops early after ``budget``
seconds once three runs are done. On CUDA every call is timed with a pair of CUDA events on the
device's current stream (the kernels' time, without the host's synchronisation latency); on the
CPU with ``time.perf_counter``. :func:`matmul_rate` is the fp32 rate that the compute floors
divide by; :func:`probe_rate` a quick one that brackets every timing: other tenants of a virtual
machine can slow it down without showing in /proc/stat. :func:`timed` repeats a timing that other
processes disturbed or that ran while the machine was slow, and keeps the least disturbed attempt.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

import torch

from .machine import OtherCPU, wait_for_quiet

if TYPE_CHECKING:
    from .measure import Settings


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _clock(device: torch.device) -> Callable[[Callable[[], Any]], float]:
    """A function that calls ``fn`` once and returns how long it took (s) on ``device``."""
    if device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)

        def cuda_events(fn: Callable[[], Any]) -> float:
            stream = torch.cuda.current_stream(device)
            start.record(stream)
            fn()
            end.record(stream)
            end.synchronize()
            return start.elapsed_time(end) / 1e3  # ms -> s

        return cuda_events

    def wall(fn: Callable[[], Any]) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    return wall


def time_fn(
    fn: Callable[[], Any], device: torch.device, runs: int, warmup: int, budget: float
) -> list[float]:
    """Times (s) of ``runs`` calls after ``warmup`` calls; stops after ``budget`` seconds
    once three runs are done. CUDA: CUDA events; CPU: wall time."""
    for _ in range(warmup):
        fn()
        _sync(device)
    clock = _clock(device)
    times: list[float] = []
    start = time.perf_counter()
    for _ in range(max(runs, 1)):
        times.append(clock(fn))
        if len(times) >= min(3, runs) and time.perf_counter() - start > budget:
            break
    return times


def matmul_rate(device: torch.device, size: int = 2048, runs: int = 5) -> float:
    """fp32 matmul rate (FLOP/s): median over ``runs`` of a size^3 product with the current
    threads (TF32 off on CUDA)."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=gen).to(device)
    b = torch.randn(size, size, generator=gen).to(device)
    out = torch.empty(size, size, device=device)
    times = time_fn(lambda: torch.mm(a, b, out=out), device, runs, 2, budget=30.0)
    return 2.0 * size**3 / statistics.median(times)


def probe_rate(device: torch.device) -> float:
    """A quick fp32 matmul rate (1024^3, median of 5): how fast the machine runs right now.

    On a virtual machine other tenants can slow it down without showing in /proc/stat; a probe
    well below the best one seen reveals that.
    """
    return matmul_rate(device, 1024, runs=5)


def timed(fn: Callable[[], Any], st: Settings) -> tuple[list[float], float, float]:
    """Times of ``fn`` (see :func:`time_fn`), the CPU other processes used meanwhile, and the
    machine's speed around the timing relative to the fastest seen (:func:`probe_rate` before
    and after; 1.0 = as fast as ever).

    With ``st.max_wait`` > 0 it first waits for a quiet machine; with ``st.retries`` it
    measures again while others used ``st.quiet`` cores or more, or while the machine ran
    below ``st.slow`` of its best probe, and keeps the least disturbed attempt.
    ``st.probe_best`` is updated with the probes.
    """
    best: Optional[tuple[list[float], float, float]] = None
    for _ in range(st.retries + 1):
        if st.max_wait > 0:
            wait_for_quiet(st.quiet, st.max_wait)
        before = probe_rate(st.device)
        with OtherCPU() as other:
            times = time_fn(fn, st.device, st.runs, st.warmup, st.budget)
        after = probe_rate(st.device)
        st.probe_best = max(st.probe_best, before, after)
        speed = round(min(before, after) / st.probe_best, 2)
        attempt = (times, other.cores, speed)
        if best is None or (other.cores, -speed) < (best[1], -best[2]) or math.isnan(best[1]):
            best = attempt
        if not other.cores >= st.quiet and speed >= st.slow:
            break
    assert best is not None
    return best
