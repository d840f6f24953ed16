"""Table mode: every selected module of the zoo on one input shape (the paper's Table 3).

The fp32 matmul rate is measured at the start, before every module and at the end of the run;
the compute floors use the highest (the lowest, strictest floor). The load average is recorded
at the same moments.
"""

from __future__ import annotations

import contextlib
import os
import platform
from collections.abc import Sequence
from typing import Any, Callable, Optional

import torch

from .machine import OtherCPU, load, wait_for_quiet
from .measure import Settings, measure, set_floors
from .memory import MIB
from .outputs import progress
from .targets import evaluate_targets
from .timing import matmul_rate
from .zoo import NOT_AVAILABLE, PAPER_TABLE3, SPECS


def environment(st: Settings, rate_size: int) -> dict[str, Any]:
    """The machine and the settings of a run, for its report."""
    device = st.device
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    if device.type == "cuda":
        cpu = torch.cuda.get_device_name(device)
    return dict(
        device=str(device),
        threads=torch.get_num_threads(),
        cpu=cpu,
        cores=os.cpu_count(),
        torch=torch.__version__,
        python=platform.python_version(),
        rank=st.rank,
        steps=st.steps,
        runs=st.runs,
        warmup=st.warmup,
        rate_size=rate_size,
    )


def run_table(
    st: Settings,
    keys: Optional[Sequence[str]] = None,
    rate_size: int = 2048,
    log: Callable[[str], None] = progress,
) -> dict[str, Any]:
    """Measure the modules ``keys`` of :data:`~hamseg.benchmark.zoo.SPECS` (default: all).

    Args:
        st: Shape, device and how to measure (:class:`~hamseg.benchmark.measure.Settings`).
        keys: Rows to measure, in this order.
        rate_size: Side of the square matmul whose rate sets the floors.
        log: Called with a progress line before and after every module.

    Returns:
        ``env`` (machine, settings, rates, loads), ``rows`` (one dict per module, see
        :func:`~hamseg.benchmark.measure.measure`), ``targets``, ``paper_table3`` and
        ``not_available``.
    """
    keys = list(keys or SPECS)
    env = environment(st, rate_size)
    env.update(shape=list(st.shape), load_start=load())

    def rate() -> tuple[float, float]:
        # Measured like the modules (waiting for quiet when asked): a disturbed rate would be
        # low, which would make the floors high, i.e. lenient.
        if st.max_wait > 0:
            wait_for_quiet(st.quiet, st.max_wait)
        with OtherCPU() as other:
            value = matmul_rate(st.device, rate_size)
        return value, other.cores

    env["rate_start"], env["rate_start_other_cpu"] = rate()
    rates = [env["rate_start"]]
    rows = []
    for i, key in enumerate(keys):
        if i:
            rates.append(rate()[0])  # before every module: the floors use the highest rate
        log(f"[benchmark] {key} (load {load()}) ...")
        row = measure(SPECS[key], st, max(rates))
        rows.append(row)
        log(
            f"[benchmark]   params {row['params'] / MIB:.2f}M  MACs {row['macs'] / 1e9:.2f}G  "
            f"infer {row['infer_ms']:.1f} ms (floor {row['infer_floor_ms']:.1f})  "
            f"fwd+bwd {row['train_ms']:.1f} ms (floor {row['train_floor_ms']:.1f})"
        )
    env["rate_end"], env["rate_end_other_cpu"] = rate()
    rates.append(env["rate_end"])
    env["rates"] = rates
    env["rate"] = max(rates)
    env["load_end"] = load()
    env["load_max"] = max([env["load_start"], env["load_end"]] + [r["load_before"] for r in rows])
    for row in rows:  # floors with the highest rate
        set_floors(row, env["rate"])
    by_key = {r["key"]: r for r in rows}
    return dict(
        env=env,
        rows=rows,
        targets=evaluate_targets(by_key, tuple(st.shape)),
        paper_table3=PAPER_TABLE3,
        not_available=NOT_AVAILABLE,
    )
