"""One row of the benchmark: params, MACs, times, compute floors and peak memory of one module.

What is measured, per module, in one process:

- params: number of parameters (the paper's "M" is 2**20, see the Hamburger row: 0.50M).
- MACs: counted by mmengine's ``FlopAnalyzer`` (:func:`~hamseg.benchmark.macs.count_macs`) on
  the module in eval mode. For the Hamburger rows also the hand count of the conv and matmul MACs
  (:func:`~hamseg.benchmark.macs.hamburger_macs`) as a cross-check, and the MACs of the timed
  inference call as it runs (:func:`~hamseg.benchmark.macs.count_run_macs`).
- time: the median of (a) inference: eval mode under ``torch.no_grad()``; (b) forward+backward:
  train mode, the input requires grad, the output is back-propagated with a fixed random
  gradient (``out.backward(g)``); parameter gradients are reset (set to None) before each run.
  A measurement stops early after ``budget`` seconds once 3 runs are done (the row records how
  many runs were used). See :func:`~hamseg.benchmark.timing.timed` for waiting and retries.
- compute floor: counted FLOPs (2 x MACs) divided by an fp32 matmul rate (FLOP/s,
  :func:`set_floors`). For inference the FLOPs are mmengine's count; for forward+backward they
  are counted with ``torch.utils.flop_counter``'s per-operator formulas on the ops the timed call
  runs (:func:`~hamseg.benchmark.macs.count_train_flops`, the only library counter that sees the
  backward pass).
- peak memory: :func:`~hamseg.benchmark.memory.peak_memory` of one call of each (bytes alive
  above the state before the call: the input and the parameters are not included).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor, nn

from hamseg.models import Hamburger

from .machine import load
from .macs import PRODUCT_OPS, count_macs, count_run_macs, count_train_flops, hamburger_macs
from .memory import MIB, peak_memory
from .timing import timed
from .zoo import Spec


@dataclass
class Settings:
    """How one module is measured.

    Attributes:
        shape: (B, C, H, W) of the input.
        device: Where the module runs.
        rank: r of the hams, bases of EMA.
        steps: K of the hams.
        runs: Timed runs (the median is reported).
        warmup: Untimed runs before them.
        budget: Seconds after which a timing stops (once 3 runs are done).
        memory: Measure peak memory.
        count: Count MACs and FLOPs (and set the floors).
        quiet: Cores other processes may use for a timing to count as undisturbed.
        max_wait: Seconds to wait, before each timing, for other processes to go under ``quiet``.
        retries: Timings repeated while they were disturbed.
        slow: A timing is disturbed if the machine ran below this fraction of its best speed.
        probe_best: The fastest matmul probe seen so far (updated by the timings).
    """

    shape: tuple[int, int, int, int]
    device: torch.device
    rank: int
    steps: int
    runs: int
    warmup: int
    budget: float
    memory: bool = True
    count: bool = True
    quiet: float = 0.3
    max_wait: float = 0.0
    retries: int = 2
    slow: float = 0.85
    probe_best: float = 0.0


def _inference(module: nn.Module, x: Tensor) -> Callable[[], Any]:
    def run() -> None:
        with torch.no_grad():
            module(x)

    return run


def _train(module: nn.Module, x: Tensor, grad: Tensor) -> Callable[[], Any]:
    xr = x.detach().clone().requires_grad_(True)
    params = [p for p in module.parameters() if p.requires_grad]

    def run() -> None:
        for p in params:
            p.grad = None
        xr.grad = None
        module(xr).backward(grad)

    return run


def set_floors(row: dict[str, Any], rate: float) -> None:
    """The compute floors of a counted row at a matmul rate (FLOP/s), and the time over them."""
    row["infer_floor_ms"] = 1e3 * 2 * row["macs"] / rate
    row["train_floor_ms"] = 1e3 * row["train_flops"] / rate
    row["infer_x_floor"] = row["infer_ms"] / row["infer_floor_ms"]
    row["train_x_floor"] = row["train_ms"] / row["train_floor_ms"]
    if "macs_run" in row:
        row["infer_run_floor_ms"] = 1e3 * 2 * row["macs_run"] / rate


def _count(
    row: dict[str, Any], spec: Spec, st: Settings, module: nn.Module, x: Tensor, grad: Tensor
) -> None:
    """The MAC and FLOP counts of a row; for Hamburger rows their hand counts."""
    row["macs"], row["macs_by_op"] = count_macs(module, x)
    row["train_flops"] = count_train_flops(module, x, grad)
    if spec.ham is None:
        return
    kind, variant, _ = spec.ham
    h, w = st.shape[2:]
    row["macs_hand"] = hamburger_macs(st.shape, kind, st.rank, st.steps, variant, path="module")
    row["macs_paper"] = hamburger_macs(st.shape, kind, st.rank, st.steps, variant)["total"]
    counted = sum(row["macs_by_op"].get(op, 0) for op in PRODUCT_OPS)
    row["macs_products"] = counted
    row["macs_hand_rel_diff"] = counted / row["macs_hand"]["total"] - 1.0
    row["macs_run"] = count_run_macs(module, x)
    fast = h * w >= Hamburger.fast_path_min_positions  # else the module calls run
    row["macs_run_hand"] = hamburger_macs(
        st.shape, kind, st.rank, st.steps, variant, path="fast" if fast else "module"
    )["total"]


def measure(spec: Spec, st: Settings, rate: float) -> dict[str, Any]:
    """Params, MACs, times, floors (at ``rate`` FLOP/s) and peak memory of one module."""
    torch.manual_seed(0)
    c = st.shape[1]
    module = spec.build(c, st.rank, st.steps).to(st.device)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(st.shape, generator=gen).to(st.device)
    grad = torch.randn(st.shape, generator=gen).to(st.device)
    row: dict[str, Any] = dict(key=spec.key, label=spec.label, config=spec.config)
    row["load_before"] = load()
    row["params"] = sum(p.numel() for p in module.parameters())
    if st.count:
        _count(row, spec, st, module, x, grad)

    module.eval()
    t, row["infer_other_cpu"], row["infer_speed"] = timed(_inference(module, x), st)
    row["infer_ms"], row["infer_runs"] = 1e3 * statistics.median(t), len(t)
    module.train()
    t, row["train_other_cpu"], row["train_speed"] = timed(_train(module, x, grad), st)
    row["train_ms"], row["train_runs"] = 1e3 * statistics.median(t), len(t)
    if st.count:
        set_floors(row, rate)
    if st.memory:
        module.eval()
        row["infer_mem_mb"] = peak_memory(_inference(module, x), st.device) / MIB
        module.train()
        row["train_mem_mb"] = peak_memory(_train(module, x, grad), st.device) / MIB
    row["load_after"] = load()
    return row
