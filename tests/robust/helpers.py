"""Shared pieces of the robustness tests: the tiny HamHead config, in-process runners, tools
run in subprocesses (to completion, or watched line by line)."""

from __future__ import annotations

import itertools
import os
import os.path as osp
import queue
import re
import signal
import subprocess
import sys
import threading
import time
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


def train_until_stopped(cfg: Config, *hooks: Hook):
    """Build a runner, register ``hooks``, train; the TrainingStopped it raised (or None) and
    the runner."""
    from hamseg.engine import TrainingStopped

    runner = build_runner(cfg)
    for hook in hooks:
        runner.register_hook(hook)
    try:
        runner.train()
    except TrainingStopped as stop:
        return stop, runner
    return None, runner


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


def start_process(
    cmd: list[str], extra_env: Optional[dict] = None, new_session: bool = False
) -> tuple[subprocess.Popen, queue.Queue]:
    """Start ``cmd`` (1 thread, repo on PYTHONPATH) with its output (stdout and stderr) fed
    line by line into a queue. ``new_session``: its own process group, for ``os.killpg``."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=REPO, **(extra_env or {}))
    # a handler (not SIG_IGN) here: the child starts with SIGINT at its default, as a terminal
    # starts a job, also when this session ignores it (nohup, a background job), where a shell
    # script could not trap it
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=REPO,
            start_new_session=new_session,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)  # end of output

    threading.Thread(target=pump, daemon=True).start()
    return proc, lines


def start_tool(args: list[str], extra_env: Optional[dict] = None, **kwargs):
    """:func:`start_process` for a python tool of the repo."""
    return start_process([sys.executable, *args], extra_env, **kwargs)


def wait_for_line(
    lines: queue.Queue, text: str, proc: subprocess.Popen, timeout: float = 300
) -> re.Match:
    """Block until a line matches the regular expression ``text``; return the match."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            continue
        if line is None:
            break
        seen.append(line)
        match = re.search(text, line)
        if match:
            return match
    proc.kill()
    raise AssertionError(f"{text!r} never appeared; output:\n{''.join(seen)[-3000:]}")


def finish(proc: subprocess.Popen, lines: queue.Queue, timeout: float = 300) -> tuple[int, str]:
    """Wait (bounded) for the process to end; its exit code and its remaining output."""
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"process {proc.args} still running after {timeout} s") from None
    rest = []
    while (line := lines.get(timeout=30)) is not None:
        rest.append(line)
    return code, "".join(rest)
