"""The CPU demo: train a head on Context Shapes (:func:`run_demo`) or on the data of a dataset
config. Training goes through mmseg's real pipeline and Runner; heads are compared over seeds by
tools/compare_demo_heads.py (a checkout's tool); docs/demo.md has the numbers.
"""

from __future__ import annotations

import json
import os
import os.path as osp
import shlex
import time
from collections.abc import Callable
from typing import Any, Optional

from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.runner import Runner

from hamseg.compat.package_lookup import config_file, hamseg_config_path
from hamseg.datasets import context_shapes as shapes
from hamseg.datasets.checks import check_dataset_paths
from hamseg.utils.config import dataset_classes

#: The main demo: HamHead with the NMF ham (the packaged config: a checkout's or a wheel's).
DEFAULT_DEMO_CONFIG = "hamseg::demo/hamhead-nmf_r18-d8_context-shapes.py"
#: Iterations between a demo run's checkpoints (the last two are kept; the final one always).
CHECKPOINT_INTERVAL = 100
#: What ``data_config`` gives every head (with its data preprocessor and class count).
LOADERS = ("train_dataloader", "val_dataloader", "test_dataloader")
DATA_KEYS = (*LOADERS, "val_evaluator", "test_evaluator")


class _Stopwatch(Hook):
    """Wall time of the training iterations and of validation."""

    priority = "VERY_LOW"
    train_time = val_time = _t = 0.0

    def _start(self, *args: Any, **kwargs: Any) -> None:
        self._t = time.perf_counter()

    before_train_iter = before_val_epoch = _start

    def after_train_iter(self, *args: Any, **kwargs: Any) -> None:
        self.train_time += time.perf_counter() - self._t

    def after_val_epoch(self, *args: Any, **kwargs: Any) -> None:
        self.val_time += time.perf_counter() - self._t


def ensure_data(data_root: str, **options: Optional[int]) -> None:
    """Generate Context Shapes into ``data_root`` unless a complete copy (with these generator
    ``options``, if any) is there."""
    wanted = {k: v for k, v in options.items() if v is not None}
    cfg = shapes.ContextShapesConfig(**wanted)
    if not shapes.is_generated(data_root, cfg if wanted else None):
        print(f"Generating Context Shapes in {data_root} ...", flush=True)
        shapes.generate_context_shapes(data_root, cfg, progress=True)


def set_schedule_length(cfg: Config, max_iters: int) -> None:
    """Set the loop, validation, checkpoint and LR scheduler ends to ``max_iters``; a warm-up
    keeps its length, at most a tenth of the new run."""
    old = cfg.train_cfg.max_iters
    warm = max(1, max_iters // 10)
    cfg.train_cfg.max_iters = cfg.train_cfg.val_interval = max_iters
    cfg.default_hooks.checkpoint.interval = max_iters
    for sched in cfg.param_scheduler:
        end = sched.get("end", old)
        sched["end"] = max_iters if end >= old else min(end, warm)
        if sched.get("begin", 0) > 0:
            sched["begin"] = min(sched["begin"], warm)


def head_config(
    config: str, data_config: Optional[str] = None, data_root: Optional[str] = None
) -> Config:
    """The head ``config`` on the data of ``data_config`` (its :data:`DATA_KEYS`, data
    preprocessor, class count and ``custom_imports``, after the head config's own), the
    loaders' root ``data_root``.

    Both may be files or packaged names (``hamseg::demo/...``, ``mmseg::...``).

    Raises:
        FileNotFoundError: No config file at ``config`` or ``data_config``.
    """
    paths = {}
    for flag, path in (("--config", config), ("--data-config", data_config)):
        try:
            paths[flag] = path and config_file(path)
        except FileNotFoundError as err:  # a packaged name says where it looked
            detail = err if "::" in path else "no such config file"
            raise FileNotFoundError(f"{flag} {path}: {detail}") from None
    cfg = Config.fromfile(paths["--config"])
    if data_config:
        data = Config.fromfile(paths["--data-config"])
        for key in (k for k in DATA_KEYS if k in data):
            cfg[key] = data[key]
        model = data.get("model", {})
        train = data.train_dataloader.dataset
        num = model.get("decode_head", {}).get("num_classes")
        cfg.model.decode_head.num_classes = num or len(dataset_classes(train))
        if "data_preprocessor" in model:
            cfg.model.data_preprocessor = model.data_preprocessor
        imports = [cfg.get("custom_imports", {}), data.get("custom_imports", {})]
        imports = list(dict.fromkeys(m for i in imports for m in i.get("imports", [])))
        if imports:  # e.g. the module that registers the data config's dataset class
            cfg.custom_imports = dict(imports=imports, allow_failed_imports=False)
    for loader in LOADERS if data_root else ():
        cfg[loader].dataset.data_root = data_root
    return cfg


def run_demo(
    config: str = DEFAULT_DEMO_CONFIG,
    data_root: Optional[str] = None,
    work_dir: Optional[str] = None,
    seed: Optional[int] = None,
    max_iters: Optional[int] = None,
    data_size: Optional[int] = None,
    num_train: Optional[int] = None,
    num_val: Optional[int] = None,
    draw: bool = True,
    cfg_options: Optional[dict] = None,
    json_out: Optional[str] = None,
    data_config: Optional[str] = None,
    checkpoint_interval: int = CHECKPOINT_INTERVAL,
    prepare: Optional[Callable[[Config], bool]] = None,
) -> dict[str, Any]:
    """Train and validate the head of ``config`` on Context Shapes (generated into ``data_root``,
    default data/context_shapes, if needed) or the data of ``data_config`` (:func:`head_config`);
    return the result (mIoU, params, times, checkpoint, ...), also written to
    ``<work_dir>/demo_result.json`` and ``json_out``. ``draw=False``: no prediction images.
    A checkpoint every ``checkpoint_interval`` iterations. ``prepare(cfg)`` runs before the
    Runner is built (tools/run_demo.py: the guard hooks, ``--resume``); False: the run is
    already complete, and its saved result is returned."""
    if not data_config:
        data_root = data_root or "data/context_shapes"
        ensure_data(data_root, size=data_size, num_train=num_train, num_val=num_val)
    cfg = head_config(config, data_config, data_root)
    cfg.merge_from_dict(cfg_options or {})
    if data_config:
        check_dataset_paths(cfg)
    if seed is not None:
        cfg.randomness = dict(seed=seed)
    if max_iters is not None:
        set_schedule_length(cfg, max_iters)
    if not draw:
        cfg.default_hooks.visualization.draw = False
    checkpoint = cfg.default_hooks.checkpoint
    checkpoint.update(interval=min(checkpoint_interval, cfg.train_cfg.max_iters), max_keep_ckpts=2)
    stem = osp.splitext(osp.basename(config))[0]
    cfg.work_dir = work_dir or osp.join("work_dirs", "demo", stem)
    cfg.launcher = "none"
    saved = osp.join(cfg.work_dir, "demo_result.json")
    if prepare is not None and not prepare(cfg):
        with open(saved, encoding="utf-8") as f:
            return json.load(f)
    runner = Runner.from_cfg(cfg)
    stopwatch = _Stopwatch()
    runner.register_hook(stopwatch)
    start = time.perf_counter()
    runner.train()
    metric = lambda key: float(runner.message_hub.get_scalar(f"val/{key}").current())
    params = lambda m: int(sum(p.numel() for p in m.parameters()))  # noqa: E731
    result = dict(
        name=cfg.get("demo_name", stem),
        config=config,
        seed=cfg.randomness.get("seed"),
        max_iters=cfg.train_cfg.max_iters,
        **{key: metric(key) for key in ("mIoU", "aAcc", "mAcc")},
        params=params(runner.model),
        head_params=params(runner.model.decode_head),
        train_time_s=round(stopwatch.train_time, 2),
        val_time_s=round(stopwatch.val_time, 2),
        total_time_s=round(time.perf_counter() - start, 2),
        work_dir=cfg.work_dir,
        checkpoint=osp.join(cfg.work_dir, f"iter_{cfg.train_cfg.max_iters}.pth"),
    )
    for path in filter(None, (saved, json_out)):
        _write(path, json.dumps(result, indent=2))
    return result


def demo_command_for(checkpoint: str) -> Optional[str]:
    """The ``tools/run_demo.py`` command that writes ``checkpoint``, if it is a demo checkpoint
    (``work_dirs/demo/<demo config name>/iter_<N>.pth``, where :func:`run_demo` writes it)."""
    parts = osp.normpath(checkpoint).split(os.sep)
    name = f"demo/{parts[-2]}.py" if len(parts) >= 4 else ""
    iters = parts[-1].removeprefix("iter_").removesuffix(".pth")
    if parts[-4:-2] != ["work_dirs", "demo"] or not iters.isdigit():
        return None
    try:
        path = hamseg_config_path(name)
    except FileNotFoundError:
        return None
    args = ["python", "tools/run_demo.py", "--config", f"configs/{name}"]
    if int(iters) != Config.fromfile(path).train_cfg.max_iters:
        args += ["--max-iters", iters]
    return shlex.join(args)


def _write(path: str, text: str) -> None:
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
