"""DataLoader workers ignore the pre-emption signals that slurm sends to every process of a job
step, but still end when their parent (the DataLoader's shutdown) terminates them."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import time

import mmengine.runner.runner as runner_module
import pytest
from torch.utils.data import DataLoader, Dataset

from hamseg.engine.preemption import protect_workers


class Pids(Dataset):
    """Each sample: the pid of the worker process that loads it."""

    def __len__(self) -> int:
        return 1000

    def __getitem__(self, index: int) -> int:
        return os.getpid()


def status(pid: int) -> dict[str, str]:
    """/proc/<pid>/status as a dict ({} once the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as lines:
            return dict(line.rstrip("\n").split(":\t", 1) for line in lines if ":\t" in line)
    except FileNotFoundError:
        return {}


def wait_until(condition, timeout: float = 20) -> bool:
    """Poll ``condition`` (reads of /proc) until it holds; whether it did within ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def alive(pid: int) -> bool:
    return "zombie" not in status(pid).get("State", "zombie")


@pytest.fixture
def protected():
    protect_workers([signal.SIGTERM, signal.SIGUSR1])
    yield runner_module.default_worker_init_fn  # what mmengine's build_dataloader uses
    protect_workers(())


def test_workers_drop_foreign_signals_and_obey_their_parent(protected):
    init_fn = functools.partial(protected, num_workers=1, rank=0, seed=0)  # as mmengine does
    loader = DataLoader(Pids(), batch_size=1, num_workers=1, worker_init_fn=init_fn)
    batches = iter(loader)
    worker = int(next(batches))  # worker_init_fn has run: the signals are blocked
    for name in ("USR1", "TERM"):  # sent by another process, as slurm does
        subprocess.run(["kill", f"-{name}", str(worker)], check=True)
    # the watcher thread takes both signals (none pending any more) and drops them
    assert wait_until(lambda: int(status(worker).get("ShdPnd", "1"), 16) == 0)
    assert alive(worker) and int(next(batches)) == worker  # still loading
    os.kill(worker, signal.SIGTERM)  # from the parent: the shutdown path
    assert wait_until(lambda: not alive(worker))
    del batches
