"""One real training iteration of a recipe at full size: seconds and the process's peak memory.

The model is built by :func:`~hamseg.benchmark.training.build_for_training` on the CPU; each
iteration is ``model.train_step`` on a synthetic batch (random uint8 images and labels, 5% ignore
pixels): data preprocessing, forward, loss, backward and the SGD update. Measured: seconds per
iteration, the loss, the peak resident memory of the process (``ru_maxrss``) and the resident
memory before the first iteration. Run it in a fresh process for the peak to be the iteration's.
"""

from __future__ import annotations

import os
import os.path as osp
import resource
import time
from typing import Any, Optional

import torch

from .training import REPO, build_for_training, synthetic_batch


def current_rss_mib() -> float:
    """Resident memory of this process now (Linux /proc), MiB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far (``ru_maxrss`` is in KiB on Linux), MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def benchmark(config: str, batch_size: Optional[int], size: int, iters: int) -> dict[str, Any]:
    """Run ``iters`` training iterations of ``config`` (a path) on ``batch_size`` (default: the
    config's train batch size) images of ``size`` x ``size``; returns the measurements."""
    model, optim_wrapper, cfg = build_for_training(config, size, torch.device("cpu"))
    batch = batch_size or cfg.train_dataloader.batch_size
    data = synthetic_batch(batch, size, model.decode_head.num_classes)
    rss_before = current_rss_mib()
    times, losses = [], []
    for _ in range(iters):
        start = time.perf_counter()
        log_vars = model.train_step(data, optim_wrapper)
        times.append(time.perf_counter() - start)
        losses.append(log_vars["loss"].item())
    return dict(
        config=osp.relpath(osp.abspath(config), REPO),
        batch_size=batch,
        size=size,
        iters=iters,
        seconds_per_iter=times,
        loss=losses,
        rss_before_mib=round(rss_before, 1),
        peak_rss_mib=round(peak_rss_mib(), 1),
        threads=torch.get_num_threads(),
        torch=torch.__version__,
        params_m=round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
    )


def summary(result: dict[str, Any]) -> str:
    """The measurements as aligned ``name  value`` lines."""
    rows = [
        ("config", result["config"]),
        ("batch x size", f"{result['batch_size']} x {result['size']}x{result['size']}"),
        ("parameters", f"{result['params_m']} M"),
        ("seconds / iteration", ", ".join(f"{t:.1f}" for t in result["seconds_per_iter"])),
        ("loss", ", ".join(f"{v:.4f}" for v in result["loss"])),
        ("RSS before / peak", f"{result['rss_before_mib']:.0f} / {result['peak_rss_mib']:.0f} MiB"),
        ("threads, torch", f"{result['threads']}, {result['torch']}"),
    ]
    return "\n".join(f"{key:<22} {value}" for key, value in rows)
