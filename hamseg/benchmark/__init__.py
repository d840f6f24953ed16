"""Cost benchmarks: the paper's Table 3 on your machine, and whole-model training iterations.

Geng et al., "Is Attention Better Than Matrix Decomposition?" (ICLR 2021), Sec. 3.3, Table 3,
App. E.2. The command-line front ends are tools/benchmark_context.py, tools/benchmark_model.py
and tools/benchmark_train_iter.py; docs/benchmark.md shows what they measure.

Modules:

- :mod:`~hamseg.benchmark.zoo`: the context modules (rows) and the paper's Table 3.
- :mod:`~hamseg.benchmark.macs`: MAC counts (mmengine's counter, the operators a call runs,
  the Hamburger's hand count).
- :mod:`~hamseg.benchmark.machine`: load average, other processes' CPU, waiting for quiet.
- :mod:`~hamseg.benchmark.timing`: timings (CUDA events on CUDA), matmul rates, retries.
- :mod:`~hamseg.benchmark.memory`: peak memory of one call.
- :mod:`~hamseg.benchmark.measure`: one row (params, MACs, times, floors, memory).
- :mod:`~hamseg.benchmark.table` / :mod:`~hamseg.benchmark.sweep`: the two modes of the
  context benchmark; :mod:`~hamseg.benchmark.targets` and :mod:`~hamseg.benchmark.report` its
  targets and report; :mod:`~hamseg.benchmark.outputs` the files and progress lines.
- :mod:`~hamseg.benchmark.training`: a config's model for one-process training and a synthetic
  batch; :mod:`~hamseg.benchmark.model` (models side by side) and
  :mod:`~hamseg.benchmark.train_iter` (one full-size iteration) time them.
"""

from .macs import count_macs, count_run_macs, count_train_flops, hamburger_macs
from .measure import Settings, measure
from .memory import peak_memory
from .sweep import run_sweep
from .table import run_table
from .zoo import PAPER_SHAPE, PAPER_TABLE3, SPECS

__all__ = [
    "PAPER_SHAPE",
    "PAPER_TABLE3",
    "SPECS",
    "Settings",
    "count_macs",
    "count_run_macs",
    "count_train_flops",
    "hamburger_macs",
    "measure",
    "peak_memory",
    "run_sweep",
    "run_table",
]
