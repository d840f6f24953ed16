"""Timings: runs, warm-up and budget; retries of disturbed timings."""

from __future__ import annotations

import time

import torch

from hamseg.benchmark import timing
from hamseg.benchmark.measure import Settings

CPU = torch.device("cpu")


def test_runs_warmup_and_budget():
    """Warm-up calls are not timed; the budget stops a timing once three runs are done."""
    calls = []

    def work():
        calls.append(1)
        time.sleep(0.01)

    times = timing.time_fn(work, CPU, runs=5, warmup=2, budget=1e9)
    assert len(calls) == 7 and len(times) == 5 and min(times) >= 0.01
    calls.clear()
    assert len(timing.time_fn(work, CPU, runs=5, warmup=0, budget=0.0)) == 3
    assert len(timing.time_fn(work, CPU, runs=2, warmup=0, budget=0.0)) == 2
    assert len(timing.time_fn(work, CPU, runs=0, warmup=0, budget=0.0)) == 1
    assert len(calls) == 6


def test_a_slowed_down_timing_is_repeated(monkeypatch):
    """A timing bracketed by a probe at half the best speed (another tenant of the VM) is
    repeated; the undisturbed attempt is kept and its speed reported."""
    probes = iter([100.0, 50.0, 100.0, 98.0])
    monkeypatch.setattr(timing, "probe_rate", lambda device: next(probes))
    monkeypatch.setattr(timing, "OtherCPU", _NoOthers)
    st = Settings((1, 1, 1, 1), CPU, 1, 1, 3, 0, 10.0, retries=2)
    calls = []
    times, others, speed = timing.timed(lambda: calls.append(1), st)
    assert len(calls) == 6 and len(times) == 3  # two attempts of 3 runs, the second kept
    assert (others, speed) == (0.0, 0.98) and st.probe_best == 100.0
    st = Settings((1, 1, 1, 1), CPU, 1, 1, 3, 0, 10.0, retries=0)
    probes = iter([100.0, 50.0])
    assert timing.timed(lambda: None, st)[2] == 0.5  # no retries: reported, not repeated


class _NoOthers:
    cores = 0.0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None
