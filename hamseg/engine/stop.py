"""How a run stops on purpose: every rank at once (:func:`agree_max`), with an exit code that says
why (:class:`TrainingStopped`), which the launch scripts report once (:func:`report_exit`)."""

from __future__ import annotations

import gc
import os
import os.path as osp
import time
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
    """Collect the run, destroy the process group and join gloo's threads before the exit (a gloo
    thread dropping a tensor while the interpreter finalizes aborted 2 of 26 two-rank runs with
    "terminate called without an active exception"). Whether there was a group to leave."""
    if not (dist.is_available() and dist.is_initialized()):
        return False
    gc.collect()  # the run's reference cycles (runner, hooks, DDP model) and their gloo work
    dist.destroy_process_group()
    gc.collect()  # what still held the group: its destructor joins the threads
    return True


def report_exit(code: int, timeout: float = 30) -> int:
    """The exit code of a rank that stops with ``code``. Under tools/dist_train.sh and the slurm
    scripts (``$HAMSEG_RANK_CODES``) the rank writes ``code`` there and waits for the other ranks
    of its folder: when all wrote ``code``, 0 (the script exits with ``code``, and torchrun or
    srun print no failure report), else ``code``."""
    folder = os.environ.get("HAMSEG_RANK_CODES")
    if not folder or not code:
        return code
    rank = os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0"))
    with open(osp.join(folder, f".code.{rank}"), "w") as handle:
        handle.write(f"{code}\n")
    os.replace(osp.join(folder, f".code.{rank}"), osp.join(folder, f"code.{rank}"))
    agent = "TORCHELASTIC_RUN_ID" in os.environ  # torchrun: one folder per node
    ranks = int(os.environ.get("LOCAL_WORLD_SIZE" if agent else "SLURM_NTASKS", "1"))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = [name for name in os.listdir(folder) if name.startswith("code.")]
        if len(names) >= ranks:
            codes = {open(osp.join(folder, name)).read().strip() for name in names}
            return 0 if codes == {str(code)} else code
        time.sleep(0.1)
    return code
