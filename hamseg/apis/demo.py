"""The CPU demo's training run: Context Shapes (generated if absent), a demo head, val mIoU.

Training goes through mmseg's real pipeline (files on disk, LoadImageFromFile, LoadAnnotations,
the Runner, IoUMetric); see docs/demo.md. :func:`run_demo` is what ``tools/run_demo.py`` runs and
what ``tools/compare_demo_heads.py`` runs once per head and seed, each in its own process.
"""

from __future__ import annotations

import json
import os
import os.path as osp
import time
from typing import Any, Optional

from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.runner import Runner
from torch import nn

from hamseg.datasets.context_shapes import (
    ContextShapesConfig,
    generate_context_shapes,
    is_generated,
)

__all__ = [
    "DEFAULT_DEMO_CONFIG",
    "count_params",
    "demo_name",
    "ensure_data",
    "run_demo",
    "set_schedule_length",
]

#: The main demo: HamHead with the NMF ham (relative to the repository root).
DEFAULT_DEMO_CONFIG = "configs/demo/hamhead-nmf_r18-d8_context-shapes.py"


class _StopwatchHook(Hook):
    """Measures wall time spent in training iterations and in validation."""

    priority = "VERY_LOW"

    def __init__(self) -> None:
        self.train_time = 0.0
        self.val_time = 0.0
        self._t = 0.0

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:  # noqa: D102
        self._t = time.perf_counter()

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:  # noqa: D102
        self.train_time += time.perf_counter() - self._t

    def before_val_epoch(self, runner) -> None:  # noqa: D102
        self._t = time.perf_counter()

    def after_val_epoch(self, runner, metrics=None) -> None:  # noqa: D102
        self.val_time += time.perf_counter() - self._t


def ensure_data(
    data_root: str,
    size: Optional[int] = None,
    num_train: Optional[int] = None,
    num_val: Optional[int] = None,
) -> None:
    """Generate Context Shapes into ``data_root`` unless a complete copy is already there.

    Args:
        data_root: Dataset folder.
        size, num_train, num_val: Generator options; None keeps the default, and a copy with
            any options is reused when all three are None.
    """
    wanted = {
        k: v
        for k, v in dict(size=size, num_train=num_train, num_val=num_val).items()
        if v is not None
    }
    cfg = ContextShapesConfig(**wanted)
    if is_generated(data_root, cfg if wanted else None):
        return
    print(f"Generating Context Shapes in {data_root} ...", flush=True)
    generate_context_shapes(data_root, cfg, progress=True)


def set_schedule_length(cfg: Config, max_iters: int) -> None:
    """Change the schedule length: loop, validation, checkpoint and LR scheduler ends.

    Schedulers that ran to the old end now run to ``max_iters``; a warm-up keeps its length but
    at most a tenth of the new run.
    """
    old = cfg.train_cfg.max_iters
    cfg.train_cfg.max_iters = max_iters
    cfg.train_cfg.val_interval = max_iters
    cfg.default_hooks.checkpoint.interval = max_iters
    for sched in cfg.param_scheduler:
        warm_end = min(sched.get("end", old), max(1, max_iters // 10))
        if sched.get("end", old) >= old:
            sched["end"] = max_iters
        else:
            sched["end"] = warm_end
        if sched.get("begin", 0) > 0:
            sched["begin"] = min(sched["begin"], max(1, max_iters // 10))


def count_params(module: nn.Module) -> int:
    """Number of parameters of a module."""
    return int(sum(p.numel() for p in module.parameters()))


def demo_name(cfg: Config, config_path: str) -> str:
    """Display name of the head (config's ``demo_name``, else the config's file name)."""
    return cfg.get("demo_name", osp.splitext(osp.basename(config_path))[0])


def _write_json(path: str, result: dict[str, Any]) -> None:
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)


def run_demo(
    config: str = DEFAULT_DEMO_CONFIG,
    data_root: str = "data/context_shapes",
    work_dir: Optional[str] = None,
    seed: Optional[int] = None,
    max_iters: Optional[int] = None,
    data_size: Optional[int] = None,
    num_train: Optional[int] = None,
    num_val: Optional[int] = None,
    draw: bool = True,
    cfg_options: Optional[dict] = None,
    json_out: Optional[str] = None,
) -> dict[str, Any]:
    """Generate data if needed, train the demo head, validate; return the result dictionary.

    Args:
        config: Demo config (configs/demo/*.py).
        data_root: Context Shapes folder (generated there if absent).
        work_dir: Default ``work_dirs/demo/<config name>``.
        seed: Training seed (default: the config's, 0).
        max_iters: Schedule length (default: the config's, 500); see
            :func:`set_schedule_length`.
        data_size, num_train, num_val: Generator options (see :func:`ensure_data`).
        draw: Write validation prediction images.
        cfg_options: Config overrides (``--cfg-options``).
        json_out: Also write the result JSON here.

    Returns:
        ``name, config, seed, max_iters, mIoU, aAcc, mAcc, params, head_params, train_time_s,
        val_time_s, total_time_s, checkpoint, work_dir``; also written to
        ``<work_dir>/demo_result.json``.
    """
    ensure_data(data_root, data_size, num_train, num_val)
    cfg = Config.fromfile(config)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    for loader in ("train_dataloader", "val_dataloader", "test_dataloader"):
        if loader in cfg:
            cfg[loader].dataset.data_root = data_root
    if seed is not None:
        cfg.randomness = dict(seed=seed)
    if max_iters is not None:
        set_schedule_length(cfg, max_iters)
    if not draw:
        cfg.default_hooks.visualization.draw = False
    name = osp.splitext(osp.basename(config))[0]
    cfg.work_dir = work_dir or osp.join("work_dirs", "demo", name)
    cfg.launcher = "none"

    runner = Runner.from_cfg(cfg)
    stopwatch = _StopwatchHook()
    runner.register_hook(stopwatch)
    start = time.perf_counter()
    runner.train()
    total = time.perf_counter() - start
    hub = runner.message_hub
    model = runner.model
    result = dict(
        name=demo_name(cfg, config),
        config=config,
        seed=cfg.randomness.get("seed"),
        max_iters=cfg.train_cfg.max_iters,
        mIoU=float(hub.get_scalar("val/mIoU").current()),
        aAcc=float(hub.get_scalar("val/aAcc").current()),
        mAcc=float(hub.get_scalar("val/mAcc").current()),
        params=count_params(model),
        head_params=count_params(model.decode_head),
        train_time_s=round(stopwatch.train_time, 2),
        val_time_s=round(stopwatch.val_time, 2),
        total_time_s=round(total, 2),
        checkpoint=osp.join(cfg.work_dir, f"iter_{cfg.train_cfg.max_iters}.pth"),
        work_dir=cfg.work_dir,
    )
    _write_json(osp.join(cfg.work_dir, "demo_result.json"), result)
    if json_out:
        _write_json(json_out, result)
    return result
