"""Cost benchmarks: the paper's Table 3 on your machine (Geng et al., ICLR 2021, Sec. 3.3,
App. E.2), whole-model training iterations, SegNeXt's head, ONNX Runtime latency, the GPU check.

Front ends: tools/benchmark_*.py and tools/gpu_check.sh; docs/benchmark.md shows what they
measure. ``zoo`` (the modules), ``measure`` (time, memory, MACs), ``context`` (Table 3, sweep),
``models`` (whole models, SegNeXt), ``deploy`` (ONNX Runtime), ``gpu_check`` (the report).
"""

from .context import Settings, measure_row, run_sweep, run_table
from .measure import count_macs, count_run_macs, count_train_flops, hamburger_macs, peak_memory
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
    "measure_row",
    "peak_memory",
    "run_sweep",
    "run_table",
]
