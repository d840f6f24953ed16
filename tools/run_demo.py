"""The hamseg demo: generate Context Shapes if absent, train a demo head on CPU, print val mIoU.

Usage::

    python tools/run_demo.py                      # HamHead-NMF, seed 0, a few minutes on 2 cores
    python tools/run_demo.py --config configs/demo/fcn_r18-d8_context-shapes.py   # local baseline
    python tools/run_demo.py --max-iters 20 --work-dir /tmp/smoke                  # smoke test

Training goes through mmseg's real pipeline (files on disk, LoadImageFromFile, LoadAnnotations,
the Runner, IoUMetric). The last line printed is ``<head> demo: val mIoU = <value>``. The work
dir gets the checkpoint, the log, TensorBoard scalars (loss, lr, mIoU) and validation prediction
images, and ``demo_result.json`` (mIoU, parameters, train and eval time).
"""

from __future__ import annotations

import argparse
import json
import os
import os.path as osp
import sys
import time
from typing import Any, Optional

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from mmengine.config import Config, DictAction  # noqa: E402
from mmengine.hooks import Hook  # noqa: E402
from mmengine.runner import Runner  # noqa: E402

from hamseg.datasets.context_shapes import (  # noqa: E402
    ContextShapesConfig,
    generate_context_shapes,
    is_generated,
)

DEFAULT_CONFIG = "configs/demo/hamhead-nmf_r18-d8_context-shapes.py"


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


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", default=DEFAULT_CONFIG, help="demo config (configs/demo/*.py)")
    p.add_argument("--data-root", default="data/context_shapes", help="Context Shapes folder")
    p.add_argument("--work-dir", help="default: work_dirs/demo/<config name>")
    p.add_argument("--seed", type=int, default=None, help="training seed (config default: 0)")
    p.add_argument("--max-iters", type=int, default=None, help="override the schedule length")
    p.add_argument("--data-size", type=int, default=None, help="generate images of this side")
    p.add_argument("--num-train", type=int, default=None, help="generate this many train images")
    p.add_argument("--num-val", type=int, default=None, help="generate this many val images")
    p.add_argument("--no-vis", action="store_true", help="skip validation prediction images")
    p.add_argument("--json-out", default=None, help="also write the result JSON here")
    p.add_argument(
        "--cfg-options", nargs="+", action=DictAction, help="override config keys: key=value"
    )
    return p.parse_args(argv)


def ensure_data(data_root: str, args: argparse.Namespace) -> None:
    """Generate Context Shapes into ``data_root`` unless a complete copy is already there."""
    wanted = {
        k: v
        for k, v in dict(
            size=args.data_size, num_train=args.num_train, num_val=args.num_val
        ).items()
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


def count_params(module: Any) -> int:
    """Number of parameters of a module."""
    return int(sum(p.numel() for p in module.parameters()))


def demo_name(cfg: Config, config_path: str) -> str:
    """Display name of the head (config's ``demo_name``, else the config's file name)."""
    return cfg.get("demo_name", osp.splitext(osp.basename(config_path))[0])


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Generate data if needed, train, validate; return the result dictionary."""
    ensure_data(args.data_root, args)
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    for loader in ("train_dataloader", "val_dataloader", "test_dataloader"):
        if loader in cfg:
            cfg[loader].dataset.data_root = args.data_root
    if args.seed is not None:
        cfg.randomness = dict(seed=args.seed)
    if args.max_iters is not None:
        set_schedule_length(cfg, args.max_iters)
    if args.no_vis:
        cfg.default_hooks.visualization.draw = False
    name = osp.splitext(osp.basename(args.config))[0]
    cfg.work_dir = args.work_dir or osp.join("work_dirs", "demo", name)
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
        name=demo_name(cfg, args.config),
        config=args.config,
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
    with open(osp.join(cfg.work_dir, "demo_result.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    if args.json_out:
        os.makedirs(osp.dirname(osp.abspath(args.json_out)), exist_ok=True)
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return result


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point; prints ``<head> demo: val mIoU = <value>`` last."""
    args = parse_args(argv)
    result = run(args)
    print(
        f"checkpoint: {result['checkpoint']}  (train {result['train_time_s']:.0f} s, "
        f"eval {result['val_time_s']:.0f} s)"
    )
    print(f"{result['name']} demo: val mIoU = {result['mIoU']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
