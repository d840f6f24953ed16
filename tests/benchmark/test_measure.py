"""Timings (runs, warm-up, budget, alternation, spread), peak memory, the device option."""

from __future__ import annotations

import time

import pytest
import torch

from hamseg.utils.errors import UsageError
from tools.lab.benchmark.measure import MIB, alternate, peak_memory, select_device, spread, time_fn

CPU = torch.device("cpu")


def test_runs_warmup_and_budget():
    """Warm-up calls are not timed; the budget stops a timing once three runs are done."""
    calls = []

    def work():
        calls.append(1)
        time.sleep(0.01)

    times = time_fn(work, CPU, runs=5, warmup=2, budget=1e9)
    assert len(calls) == 7 and len(times) == 5 and min(times) >= 0.01
    calls.clear()
    assert len(time_fn(work, CPU, runs=5, warmup=0, budget=0.0)) == 3
    assert len(time_fn(work, CPU, runs=2, warmup=0, budget=0.0)) == 2
    assert len(time_fn(work, CPU, runs=0, warmup=0, budget=0.0)) == 1
    assert len(calls) == 6


def test_alternate_warms_up_each_then_alternates_the_order():
    order = []
    times = alternate({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, CPU, 3)
    assert order == ["a", "b"] + ["a", "b", "b", "a", "a", "b"]
    assert [len(v) for v in times.values()] == [3, 3]


def test_spread_is_the_range_over_the_median():
    assert spread([1.0, 2.0, 4.0]) == 1.5 and spread([3.0]) == 0.0


def test_peak_memory_sees_a_temporary():
    def work():
        a = torch.ones(2 * MIB)  # 8 MiB, freed before b is allocated
        del a
        b = torch.ones(MIB // 2)  # 2 MiB
        return b.sum()

    assert 8 * MIB <= peak_memory(work, CPU) < 9 * MIB


def test_select_device():
    previous = torch.get_num_threads()
    try:
        assert select_device("cpu", 1) == CPU and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(previous)
    with pytest.raises(UsageError, match=r"^--device gpu0: "):
        select_device("gpu0", 1)
    if not torch.cuda.is_available():
        with pytest.raises(UsageError, match=r"^--device cuda:1: torch sees no CUDA device here$"):
            select_device("cuda:1", 1)
