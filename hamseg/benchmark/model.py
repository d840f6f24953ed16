"""One training iteration of whole segmentation models, side by side (default HamNet vs NonLocal).

Each config is built by :func:`~hamseg.benchmark.training.build_for_training`. An iteration is
``model.train_step`` on one synthetic batch (random uint8 images, random labels with 5% ignore
pixels): preprocessing, forward, losses (auxiliary heads included when the config has them),
backward and the optimizer step. Reported per model: parameters, median seconds per iteration,
the peak memory of one iteration (:func:`~hamseg.benchmark.memory.peak_memory`), the CPU other
processes used while the iterations were timed (cores), and the time ratio to the first model.
A config with an auxiliary head is measured twice by default: as configured and without it.
"""

from __future__ import annotations

import os.path as osp
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch

from .machine import OtherCPU, load, wait_for_quiet
from .memory import MIB, peak_memory
from .outputs import progress
from .timing import time_fn
from .training import build_for_training, resolve, synthetic_batch

#: HamNet's VOC recipe (ResNet-101 OS8 + HamHead) and mmseg's NonLocal R101-D8 on VOC.
HAM = "configs/ham_voc.py"
NONLOCAL = "mmseg::nonlocal_net/nonlocal_r101-d8_4xb4-40k_voc12aug-512x512.py"


def default_label(config: str) -> str:
    """A row label for a config: HamNet for :data:`HAM`, else the config's file name."""
    return "HamNet (HamHead NMF)" if config == HAM else osp.splitext(osp.basename(config))[0]


@dataclass
class IterSettings:
    """How training iterations of a model are measured.

    Attributes:
        size: Square input size.
        device: Where the model runs.
        batch: Images per iteration.
        iters: Timed iterations (the median is reported).
        warmup: Untimed iterations before them.
        memory: Measure the peak memory of one iteration.
        quiet_cpu: Cores other processes may use for the machine to count as quiet.
        max_wait: Seconds to wait, before the timed iterations, for a quiet machine.
    """

    size: int
    device: torch.device
    batch: int = 1
    iters: int = 3
    warmup: int = 1
    memory: bool = True
    quiet_cpu: float = 0.3
    max_wait: float = 0.0


def measure_model(
    config: str, label: str, st: IterSettings, no_aux: bool = False
) -> dict[str, Any]:
    """Time and peak memory of training iterations of one model (``config`` as given to
    :func:`~hamseg.benchmark.training.resolve`), without its auxiliary head if ``no_aux``."""
    model, optim_wrapper, _ = build_for_training(resolve(config), st.size, st.device, no_aux)
    data = synthetic_batch(st.batch, st.size, model.decode_head.num_classes)
    row: dict[str, Any] = dict(
        label=label,
        config=config,
        aux_head=getattr(model, "with_auxiliary_head", False),
        params=sum(p.numel() for p in model.parameters()),
        load_before=load(),
    )

    def step() -> None:
        model.train_step(data, optim_wrapper)

    for _ in range(st.warmup):
        step()
    if st.max_wait > 0:
        wait_for_quiet(st.quiet_cpu, st.max_wait)
    with OtherCPU() as other:
        times = time_fn(step, st.device, st.iters, 0, budget=float("inf"))
    row["iter_s"] = statistics.median(times)
    row["iter_s_all"] = times
    row["other_cpu"] = other.cores
    if st.memory:
        row["peak_mem_mb"] = peak_memory(step, st.device) / MIB
    row["load_after"] = load()
    return row


def run_models(
    configs: Sequence[str],
    st: IterSettings,
    labels: Optional[Sequence[str]] = None,
    aux_variant: bool = True,
    log: Callable[[str], None] = progress,
) -> dict[str, Any]:
    """Measure every config (:func:`measure_model`), and the variant without its auxiliary
    head of those that have one when ``aux_variant``. ``labels`` default to
    :func:`default_label`; ``log`` is called with a progress line per model.

    Returns:
        ``env`` (settings, loads) and ``rows``, each with ``ratio_to_first``.
    """
    labels = list(labels or [default_label(c) for c in configs])
    env = dict(
        size=st.size,
        batch=st.batch,
        iters=st.iters,
        warmup=st.warmup,
        device=str(st.device),
        threads=torch.get_num_threads(),
        torch=torch.__version__,
        load_start=load(),
    )
    rows = []
    for config, label in zip(configs, labels):
        log(f"[benchmark_model] {label} (load {load()}) ...")
        rows.append(measure_model(config, label, st))
        if rows[-1]["aux_head"] and aux_variant:
            log(f"[benchmark_model] {label} without auxiliary head ...")
            rows.append(measure_model(config, f"{label} (no aux head)", st, no_aux=True))
    env["load_end"] = load()
    for r in rows:
        r["ratio_to_first"] = r["iter_s"] / rows[0]["iter_s"]
    return dict(env=env, rows=rows)


def model_markdown(result: dict[str, Any]) -> str:
    """The rows as a markdown table under a line saying what was measured."""
    env, rows = result["env"], result["rows"]
    lines = [
        f"One training iteration (train_step: forward, loss, backward, optimizer step), input "
        f"{env['batch']}x3x{env['size']}x{env['size']}, {env['device']}, {env['threads']} "
        f"threads, median of {env['iters']} after {env['warmup']} warm-up; load (1-min) "
        f"{env['load_start']} at start, {env['load_end']} at end.",
        "",
        "| Model | Config | Aux head | Params (M) | s / iter | x first | Peak mem (MiB) | "
        "Others' CPU | load |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    first = rows[0]["iter_s"]
    for r in rows:
        mem = f"{r['peak_mem_mb']:.0f}" if "peak_mem_mb" in r else "-"
        lines.append(
            f"| {r['label']} | `{r['config']}` | {'yes' if r['aux_head'] else 'no'} | "
            f"{r['params'] / 1e6:.2f} | {r['iter_s']:.2f} | {r['iter_s'] / first:.2f} | {mem} | "
            f"{r['other_cpu']} | {r['load_before']} |"
        )
    return "\n".join(lines) + "\n"
