"""Peak memory of one call: the CUDA caching allocator's peak, or the CPU allocator's events."""

from __future__ import annotations

import json
import os.path as osp
import tempfile
from typing import Any, Callable

import torch

MIB = 2**20


def peak_memory(fn: Callable[[], Any], device: torch.device) -> int:
    """Peak bytes allocated during one call of ``fn`` above those allocated before it.

    CUDA: the caching allocator's peak statistic (``torch.cuda.max_memory_allocated`` after
    ``reset_peak_memory_stats``, minus ``memory_allocated`` before the call). CPU: there is no
    allocator peak counter, so the call runs once under ``torch.profiler`` with
    ``profile_memory=True``; the CPU allocator reports every allocation and free to the profiler,
    and the peak is the maximum of the running sum of those events (bytes alive above the state
    before the call: tensors allocated before, such as the input and the parameters, are not
    included).
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device) - base)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    with tempfile.TemporaryDirectory() as tmp:
        path = osp.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    mem = [
        e
        for e in events
        if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type", 0) == 0
    ]
    mem.sort(key=lambda e: (e["ts"], e["args"].get("Ev Idx", 0)))
    alive = peak = 0
    for e in mem:
        alive += int(e["args"]["Bytes"])
        peak = max(peak, alive)
    return peak
