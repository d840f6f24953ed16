"""Shared pieces of the robustness tests: the tiny HamHead config, in-process runners."""

from __future__ import annotations

import itertools
import os
import os.path as osp
import subprocess
import sys
from typing import Any, Optional

from mmengine.config import Config
from mmengine.hooks import Hook

from tests.conftest import REPO

TINY_HAM = osp.join(REPO, "tests", "data", "tiny_ham.py")
TRAIN = osp.join(REPO, "tools", "train.py")
TEST = osp.join(REPO, "tools", "test.py")
_names = itertools.count()


def data_options(root: str) -> list[str]:
    """--cfg-options pointing every dataloader of tiny_ham.py at ``root``."""
    return [f"{split}_dataloader.dataset.data_root={root}" for split in ("train", "val", "test")]


def tiny_cfg(data_root: str, work_dir: str, options: Optional[dict] = None) -> Config:
    """tiny_ham.py on ``data_root``, writing into ``work_dir``, with ``options`` merged."""
    cfg = Config.fromfile(TINY_HAM)
    merged = {
        f"{split}_dataloader.dataset.data_root": data_root for split in ("train", "val", "test")
    }
    merged.update(options or {})
    cfg.merge_from_dict(merged)
    cfg.work_dir = work_dir
    cfg.launcher = "none"
    # in-process runners: a fresh visualizer/logger instance per runner
    cfg.visualizer.name = f"tiny_visualizer_{next(_names)}"
    cfg.experiment_name = f"tiny_{next(_names)}"
    return cfg


def build_runner(cfg: Config):
    from mmengine.runner import Runner

    return Runner.from_cfg(cfg)


class LossRecorder(Hook):
    """Collects the total loss of every training iteration."""

    priority = "VERY_LOW"

    def __init__(self) -> None:
        self.losses: list[float] = []

    def after_train_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs=None):
        self.losses.append(float(outputs["loss"]))


def run_tool(args: list[str], timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    """Run a python tool of the repo in a subprocess (1 thread, repo on PYTHONPATH)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=REPO)
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=timeout,
        **kwargs,
    )
