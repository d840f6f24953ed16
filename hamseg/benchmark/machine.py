"""The machine a benchmark runs on: its device, and how busy it is (load, others' CPU).

Timings on a shared machine are only as good as the machine is quiet. :class:`OtherCPU` measures
the CPU that *other* processes used while a block ran (machine busy time from /proc/stat minus
this process's CPU time, in cores): a timing is undisturbed when that is near 0.
:func:`wait_for_quiet` sleeps until they go under a threshold. Other tenants of a virtual machine
can slow it down without showing in /proc/stat; :func:`hamseg.benchmark.timing.probe_rate` sees
that.
"""

from __future__ import annotations

import os
import time
from typing import Any, Optional

import torch

from hamseg.utils.errors import UsageError


def select_device(name: str, threads: int) -> torch.device:
    """The device called ``name`` ('cpu', 'cuda', 'cuda:1'); on the CPU ``threads`` intra-op
    threads are set. A name torch does not know, or CUDA without a device, is a
    :class:`~hamseg.utils.errors.UsageError` naming ``--device``."""
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise UsageError(f"--device {name}: {err}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {name}: torch sees no CUDA device here")
    if device.type == "cpu":
        torch.set_num_threads(threads)
    return device


def load() -> float:
    """1-minute load average (NaN where unavailable)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return float("nan")


def _busy_seconds() -> Optional[float]:
    """CPU seconds spent busy by the whole machine so far (Linux /proc/stat), else None."""
    try:
        with open("/proc/stat") as f:
            fields = [float(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class OtherCPU:
    """CPU used by other processes while a block runs, in cores (machine busy time minus this
    process's CPU time, over the wall time). NaN where /proc/stat is unavailable.

    Usage: ``with OtherCPU() as other: ...``, then ``other.cores``.
    """

    def __enter__(self) -> OtherCPU:
        self._busy, self._own, self._wall = _busy_seconds(), self._own_seconds(), time.time()
        self.cores = float("nan")
        return self

    @staticmethod
    def _own_seconds() -> float:
        t = os.times()
        return t.user + t.system

    def __exit__(self, *exc: Any) -> None:
        busy, wall = _busy_seconds(), time.time() - self._wall
        if busy is not None and self._busy is not None and wall > 0:
            own = self._own_seconds() - self._own
            self.cores = round(max(busy - self._busy - own, 0.0) / wall, 2)


def wait_for_quiet(threshold: float, max_wait: float, probe: float = 3.0) -> float:
    """Sleep until other processes use less than ``threshold`` cores (sampled over ``probe``
    seconds) or ``max_wait`` seconds have passed; returns the last sample."""
    start, cores = time.time(), float("nan")
    while True:
        with OtherCPU() as other:
            time.sleep(probe)
        cores = other.cores
        if not cores >= threshold or time.time() - start >= max_wait:  # NaN: no /proc
            return cores
