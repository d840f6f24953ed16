"""What the guard hooks share: every rank stops at once (:func:`agree_max`, one small all-reduce
per iteration) with an exit code that says why (:class:`TrainingStopped`). docs/robustness.md."""

from __future__ import annotations

import gc
from collections.abc import Sequence

import torch
import torch.distributed as dist
from mmengine.dist import all_reduce, get_world_size


class TrainingStopped(RuntimeError):
    """Training stopped early on purpose; the process should exit with ``exit_code``."""

    label = ""  # printed before the message on stderr

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def agree_max(values: Sequence[int]) -> list[int]:
    """Element-wise maximum of a few integers over all ranks (a collective: every rank calls)."""
    if get_world_size() == 1:
        return list(values)
    tensor = torch.tensor(list(values), dtype=torch.int64)
    all_reduce(tensor, op="max")  # moved to the backend's device (CUDA for NCCL) and back
    return tensor.tolist()


def leave_process_group() -> bool:
    """Collect the run, destroy the process group and join gloo's threads before the exit (a
    gloo thread dropping a tensor while the interpreter finalizes aborted 2 of 26 two-rank runs:
    "terminate called without an active exception"). Whether there was a group to leave."""
    if not (dist.is_available() and dist.is_initialized()):
        return False
    gc.collect()  # the run's reference cycles (runner, hooks, DDP model) and their gloo work
    dist.destroy_process_group()
    gc.collect()  # what still held the group: its destructor joins the threads
    return True
