"""The CPU demo of ``tools/run_demo.py`` (docs/demo.md): a head trained by mmseg's Runner on
Context Shapes, generated if absent, or on a dataset config's data."""

import os.path as osp
import time
from collections.abc import Callable
from typing import Any, Optional

import mmengine
from mmengine.config import Config
from mmengine.runner import Runner

from hamseg.compat.package_lookup import config_file
from hamseg.datasets import context_shapes as shapes
from hamseg.datasets.checks import check_dataset_paths
from hamseg.utils.config import dataset_classes

DEFAULT_DEMO_CONFIG = "hamseg::demo/hamhead-nmf_r18-d8_context-shapes.py"
LOADERS = ("train_dataloader", "val_dataloader", "test_dataloader")


def ensure_data(data_root: str) -> None:
    """Generate Context Shapes into ``data_root`` unless a complete copy is there."""
    if not shapes.is_generated(data_root, None):
        print(f"Generating Context Shapes in {data_root} ...", flush=True)
        shapes.generate_context_shapes(data_root, shapes.ContextShapesConfig(), progress=True)


def set_schedule_length(cfg: Config, max_iters: int) -> None:
    """End the loop, validation, checkpoints and LR schedulers at ``max_iters``; a warm-up keeps
    its length, at most a tenth of the run."""
    old, warm = cfg.train_cfg.max_iters, max(1, max_iters // 10)
    cfg.train_cfg.max_iters = cfg.train_cfg.val_interval = max_iters
    cfg.default_hooks.checkpoint.interval = max_iters
    for sched in cfg.param_scheduler:
        sched["end"] = max_iters if sched.get("end", old) >= old else min(sched["end"], warm)
        sched["begin"] = min(sched.get("begin", 0), warm)


def head_config(
    config: str, data_config: Optional[str] = None, data_root: Optional[str] = None
) -> Config:
    """The head ``config`` on ``data_config``'s loaders, evaluators, data preprocessor, class
    count and ``custom_imports`` (after the head's), every loader at ``data_root``."""
    cfg = Config.fromfile(config_file(config))
    data = Config.fromfile(config_file(data_config)) if data_config else Config()
    for key in (k for k in (*LOADERS, "val_evaluator", "test_evaluator") if k in data):
        cfg[key] = data[key]
    if data_config:
        head, model = cfg.model.decode_head, data.get("model", {})
        classes = dataset_classes(data.train_dataloader.dataset)
        head.num_classes = model.get("decode_head", {}).get("num_classes") or len(classes)
        cfg.model.data_preprocessor = model.get("data_preprocessor", cfg.model.data_preprocessor)
        imports = [m for c in (cfg, data) for m in c.get("custom_imports", {}).get("imports", [])]
        cfg.custom_imports = dict(imports=list(dict.fromkeys(imports)), allow_failed_imports=False)
    for loader in LOADERS if data_root else ():
        cfg[loader].dataset.data_root = data_root
    return cfg


def run_demo(
    config: str = DEFAULT_DEMO_CONFIG,
    data_root: Optional[str] = None,
    work_dir: Optional[str] = None,
    max_iters: Optional[int] = None,
    cfg_options: Optional[dict] = None,
    data_config: Optional[str] = None,
    prepare: Optional[Callable[[Config], bool]] = None,
) -> dict[str, Any]:
    """Train and validate :func:`head_config`; ``prepare(cfg)`` runs before the Runner (False:
    the run is complete). The result is also ``<work_dir>/demo_result.json``."""
    if not data_config:
        ensure_data(data_root := data_root or "data/context_shapes")
    cfg = head_config(config, data_config, data_root)
    if max_iters is not None:
        set_schedule_length(cfg, max_iters)
    cfg.default_hooks.checkpoint.max_keep_ckpts = 2
    cfg.default_hooks.checkpoint.interval = min(100, cfg.train_cfg.max_iters)
    cfg.merge_from_dict(dict(cfg_options or {}, launcher="none"))
    end = cfg.train_cfg.max_iters
    name = osp.splitext(osp.basename(config))[0]
    cfg.work_dir = work_dir or osp.join("work_dirs", "demo", name)
    if data_config:
        check_dataset_paths(cfg)
    saved = osp.join(cfg.work_dir, "demo_result.json")
    if prepare is not None and not prepare(cfg):
        return mmengine.load(saved)
    runner, start = Runner.from_cfg(cfg), time.perf_counter()
    runner.train()
    result = dict(
        name=cfg.get("demo_name", name),
        seed=cfg.get("randomness", {}).get("seed"),
        max_iters=end,
        mIoU=float(runner.message_hub.get_scalar("val/mIoU").current()),
        params=sum(p.numel() for p in runner.model.parameters()),
        head_params=sum(p.numel() for p in runner.model.decode_head.parameters()),
        total_time_s=round(time.perf_counter() - start, 2),
        checkpoint=osp.join(cfg.work_dir, f"iter_{end}.pth"),
    )
    mmengine.dump(result, saved, indent=2)
    return result
