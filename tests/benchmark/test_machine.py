"""How busy the machine is."""

from __future__ import annotations

import pytest
import torch

from hamseg.benchmark.machine import OtherCPU, select_device, wait_for_quiet
from hamseg.utils.errors import UsageError


def test_other_cpu_is_measured():
    with OtherCPU() as other:
        sum(i * i for i in range(200_000))  # our own work is not counted
    assert other.cores >= 0
    assert wait_for_quiet(threshold=1e9, max_wait=0, probe=0.05) >= 0


def test_select_device():
    previous = torch.get_num_threads()
    try:
        assert select_device("cpu", 1) == torch.device("cpu") and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(previous)
    with pytest.raises(UsageError, match=r"^--device gpu0: "):
        select_device("gpu0", 1)
    if not torch.cuda.is_available():
        with pytest.raises(UsageError, match=r"^--device cuda:1: torch sees no CUDA device here$"):
            select_device("cuda:1", 1)
