"""Peak memory of one call."""

from __future__ import annotations

import torch

from hamseg.benchmark.memory import MIB, peak_memory


def test_peak_memory_sees_a_temporary():
    def work():
        a = torch.ones(2 * MIB)  # 8 MiB, freed before b is allocated
        del a
        b = torch.ones(MIB // 2)  # 2 MiB
        return b.sum()

    peak = peak_memory(work, torch.device("cpu"))
    assert 8 * MIB <= peak < 9 * MIB
