"""DataLoader workers that ignore the signals a ``PreemptionHook`` handles, unless their parent
sends them: slurm signals every process of a job step, and a worker killed by SIGTERM/SIGUSR1
makes the loader raise before the stop checkpoint is written.

mmengine 0.10.7's runners pass their module-level ``default_worker_init_fn`` to every DataLoader
they build, with no option to add to it; :func:`protect_workers` replaces that attribute while a
``PreemptionHook`` runs (``()`` restores mmengine's). Tested in tests/robust/test_worker_signals.py;
tests/compat/test_upstream_canaries.py says when mmengine's runners change.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
from collections.abc import Iterable
from typing import Any

import mmengine.runner._flexible_runner as flexible_runner
import mmengine.runner.runner as runner_module
from mmengine.dataset import worker_init_fn as mmengine_worker_init_fn

__all__ = ["protect_workers", "worker_init_fn"]


def _obey_parent_only(signals: tuple, parent: int) -> None:
    """Wait for ``signals`` (blocked in this process); exit if the parent sent one."""
    while True:
        if signal.sigwaitinfo(signals).si_pid == parent:
            os._exit(0)  # what torch's worker SIGTERM handler does for its parent


def worker_init_fn(worker_id: int, *args: Any, ignored: tuple, **kwargs: Any) -> None:
    """mmengine's worker seeding; then only the parent (the DataLoader's shutdown) may end the
    worker with one of the ``ignored`` signals."""
    mmengine_worker_init_fn(worker_id, *args, **kwargs)
    signal.pthread_sigmask(signal.SIG_BLOCK, ignored)  # threads started later inherit it
    threading.Thread(target=_obey_parent_only, args=(ignored, os.getppid()), daemon=True).start()


def protect_workers(signals: Iterable[int]) -> None:
    """Make DataLoader workers that mmengine's runners start from now on ignore ``signals``
    unless their parent sends them (slurm signals every process of a step); () undoes it."""
    ignored = tuple(sorted(set(signals)))
    init = functools.partial(worker_init_fn, ignored=ignored) if ignored else None
    for module in (runner_module, flexible_runner):
        module.default_worker_init_fn = init or mmengine_worker_init_fn
