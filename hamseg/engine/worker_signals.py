"""DataLoader worker processes that survive the signals the training process handles.

slurm delivers ``--signal`` (and the SIGTERM of ``scancel``, a time limit or a pre-emption) to
every process of a job step, DataLoader workers included. In a worker, SIGUSR1's default action
ends the process, and torch's worker SIGTERM handler (``_set_worker_signal_handlers``) ends it
too unless the parent sent it. The main process then raises "DataLoader worker ... exited
unexpectedly" from its SIGCHLD handler in the middle of an iteration, before
:class:`~hamseg.engine.preemption.PreemptionHook` can write its checkpoint.

:func:`install` makes the workers of every DataLoader that mmengine builds with its default
``worker_init_fn`` ignore the given signals unless their parent sends them (the main process
handles them and stops its workers itself): it wraps ``default_worker_init_fn`` in
``mmengine.runner`` (both runners) as a picklable partial, so it works with the 'fork' and
'spawn' start methods alike. In the worker the signals are blocked and one thread waits for
them with ``sigwaitinfo``, which tells who sent each one: a signal from the parent ends the
worker as torch's handler would (the DataLoader's and multiprocessing's shutdown terminate
their workers with SIGTERM; a worker deaf to it would block the exit of a crashed run for
ever), any other is dropped. A dataloader config with its own ``worker_init_fn`` is left alone.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["install", "uninstall", "worker_init_fn"]

_ORIGINAL: dict[str, Callable] = {}


def _obey_parent_only(signals: tuple, parent: int) -> None:
    """Wait for ``signals`` (blocked in this process); exit if the parent sent one."""
    while True:
        info = signal.sigwaitinfo(signals)
        if info.si_pid == parent:
            os._exit(0)  # what torch's worker SIGTERM handler does for its parent


def worker_init_fn(worker_id: int, *args: Any, init: Callable, ignored: tuple, **kwargs) -> None:
    """mmengine's seeding (``init``), then drop the ``ignored`` signals not sent by the parent."""
    init(worker_id, *args, **kwargs)
    if ignored:
        signal.pthread_sigmask(signal.SIG_BLOCK, ignored)  # threads started later inherit it
        watcher = threading.Thread(
            target=_obey_parent_only, args=(ignored, os.getppid()), daemon=True
        )
        watcher.start()


def _modules() -> list:
    import mmengine.runner._flexible_runner as flexible_module
    import mmengine.runner.runner as runner_module

    return [runner_module, flexible_module]


def install(signals: Iterable[int]) -> None:
    """Make DataLoader workers started from now on ignore ``signals`` (numbers).

    Args:
        signals: Signal numbers; an empty iterable restores mmengine's function.
    """
    modules = _modules()
    if not _ORIGINAL:
        _ORIGINAL["init"] = modules[0].default_worker_init_fn
    ignored = tuple(sorted(set(signals)))
    wrapped = functools.partial(worker_init_fn, init=_ORIGINAL["init"], ignored=ignored)
    for module in modules:
        module.default_worker_init_fn = wrapped if ignored else _ORIGINAL["init"]


def uninstall() -> None:
    """Restore mmengine's own ``default_worker_init_fn``."""
    install(())
