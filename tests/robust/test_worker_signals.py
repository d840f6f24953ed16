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

from hamseg.engine import worker_signals


class Pids(Dataset):
    """Each sample: the pid of the worker process that loads it."""

    def __len__(self) -> int:
        return 1000

    def __getitem__(self, index: int) -> int:
        return os.getpid()


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as status:
            return "zombie" not in status.read()
    except FileNotFoundError:
        return False


@pytest.fixture
def installed():
    worker_signals.install([signal.SIGTERM, signal.SIGUSR1])
    yield runner_module.default_worker_init_fn
    worker_signals.uninstall()


def test_workers_drop_foreign_signals_and_obey_their_parent(installed):
    # the worker_init_fn mmengine's Runner.build_dataloader makes from the module attribute
    init_fn = functools.partial(installed, num_workers=1, rank=0, seed=0)
    loader = DataLoader(Pids(), batch_size=1, num_workers=1, worker_init_fn=init_fn)
    batches = iter(loader)
    worker = int(next(batches))
    time.sleep(0.5)  # the watcher thread is running
    for name in ("USR1", "TERM"):  # sent by another process, as slurm does
        subprocess.run(["kill", f"-{name}", str(worker)], check=True)
    time.sleep(0.5)
    assert alive(worker) and int(next(batches)) == worker  # still loading
    os.kill(worker, signal.SIGTERM)  # from the parent: the shutdown path
    deadline = time.monotonic() + 20
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(worker)
    del batches


def test_uninstall_restores_mmengines_function(installed):
    from mmengine.dataset import worker_init_fn

    assert installed is not worker_init_fn and installed.keywords["init"] is worker_init_fn
    worker_signals.uninstall()
    assert runner_module.default_worker_init_fn is worker_init_fn
