"""Stopping a training run on every rank at once, with an exit code that says why.

The hooks that stop a run early (:class:`~hamseg.engine.preemption.PreemptionHook`,
:class:`~hamseg.engine.divergence.NonFiniteLossHook`) each decide on one rank's evidence (a
signal one process received, a loss one process computed), but every rank must stop at the same
iteration: a rank that leaves the loop while the others enter the next DDP all-reduce leaves them
waiting until the process-group timeout. :func:`agree_max` is the one collective they use. Every
rank calls it exactly once per iteration at the same point of ``after_train_iter``, so it never
waits for a rank that has already left; it costs one all-reduce of a few integers per
iteration: a latency-bound collective with a host sync, small next to the host sync mmengine
already does every iteration when it logs the loss, and next to an iteration of a segmentation
model.

:class:`TrainingStopped` is what such a hook raises out of ``runner.train()``; ``tools/train.py``
(:func:`hamseg.cli.run_cli`) prints its message once (main rank) and exits with its
``exit_code``.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence

import torch
import torch.distributed as dist
from mmengine.dist import all_reduce, get_world_size

__all__ = ["TrainingStopped", "agree_max", "leave_process_group"]


class TrainingStopped(RuntimeError):
    """Training stopped before ``max_iters`` on purpose; the process should exit with ``exit_code``.

    Args:
        message: One line for the user.
        exit_code: The process exit code that tells a scheduler or script why it stopped.
    """

    #: What ``tools/train.py`` prints before the message on stderr.
    label = ""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def agree_max(values: Sequence[int]) -> list[int]:
    """Element-wise maximum of ``values`` over all ranks (``values`` when not distributed).

    Every rank must call this at the same point (it is a collective).

    Args:
        values: A few integers from this rank.

    Returns:
        The element-wise maximum over ranks, the same list on every rank.
    """
    if get_world_size() == 1:
        return list(values)
    tensor = torch.tensor(list(values), dtype=torch.int64)
    all_reduce(tensor, op="max")  # moved to the backend's device (CUDA for NCCL) and back
    return tensor.tolist()


def leave_process_group() -> bool:
    """Destroy this rank's process group and join its threads, before the process exits.

    Neither mmengine's runner nor torch destroys the default process group when a run ends,
    least of all when :class:`TrainingStopped` ends it by an exception; the interpreter's
    finalization then freed the runner's DDP model, whose gloo work objects were released on
    gloo's own threads (``pt_gloo_runloop``). Such a thread that needs the GIL to drop a tensor
    while the interpreter finalizes is ended by CPython mid-destructor, and the process aborts
    ("terminate called without an active exception", SIGABRT) instead of exiting with its code:
    2 of 26 two-rank divergence runs here (core dump: ``~AsyncWork`` -> ``take_gil`` ->
    ``pthread_exit``). Called once nothing holds the run any more, this collects it, destroys
    the group, and collects again: the last reference to the group goes, its destructor (which
    releases the GIL) joins the threads, and finalization finds none. Every rank has passed its
    last collective (:func:`agree_max`) by then, so this waits for nobody.

    Returns:
        Whether there was a process group to leave.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return False
    gc.collect()  # the run's reference cycles (runner, hooks, DDP model) and their gloo work
    dist.destroy_process_group()
    gc.collect()  # what still held the group
    return True
