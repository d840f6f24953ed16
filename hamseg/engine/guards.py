"""What the guard hooks share: stopping every rank at once with an exit code that says why.

The hooks decide on one rank's evidence (a signal, a loss) and agree through :func:`agree_max`,
one small all-reduce every rank calls at the same point of each iteration; ``tools/train.py``
adds them to every config (:func:`add_guard_hooks`) and turns :class:`TrainingStopped` into one
line and its exit code (:func:`hamseg.cli.run_cli`). docs/robustness.md.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.dist import all_reduce, get_world_size
from mmengine.hooks import CheckpointHook
from mmseg.registry import HOOKS

__all__ = ["GUARD_HOOKS", "TrainingStopped", "add_guard_hooks", "agree_max", "leave_process_group"]

#: The guards tools/train.py adds, in this order (registered names).
GUARD_HOOKS = ("PreemptionHook", "NonFiniteLossHook", "RandomStateHook")


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
    """Collect the run, destroy the process group and join gloo's threads before the exit.

    A gloo thread still dropping a tensor while the interpreter finalizes aborts the process
    ("terminate called without an active exception": SIGABRT instead of the exit code, 2 of 26
    two-rank divergence runs). Every rank has passed its last collective by then.

    Returns:
        Whether there was a process group to leave.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return False
    gc.collect()  # the run's reference cycles (runner, hooks, DDP model) and their gloo work
    dist.destroy_process_group()
    gc.collect()  # what still held the group: its destructor joins the threads
    return True


def _hook_class(entry: Any) -> Any:
    """The class a hook entry (dict, class or hook object) builds, if known."""
    kind = entry.get("type") if isinstance(entry, dict) else entry
    return (
        HOOKS.get(kind) if isinstance(kind, str) else kind if isinstance(kind, type) else type(kind)
    )


def add_guard_hooks(cfg: Config) -> list[str]:
    """Append the guards the config lacks (its own entry of one, under any registered name, wins
    with its options); make its ``CheckpointHook`` an ``AtomicCheckpointHook``, options kept.

    Returns:
        The type names added or swapped in (scoped: they resolve whatever ``default_scope`` is).
    """
    hooks = list(cfg.get("custom_hooks") or [])
    present = [cls for cls in map(_hook_class, hooks) if isinstance(cls, type)]
    added = [
        f"mmseg.{name}"
        for name in GUARD_HOOKS
        if not any(issubclass(c, HOOKS.get(name)) for c in present)
    ]
    cfg.custom_hooks = hooks + [dict(type=name) for name in added]
    checkpoint = (cfg.get("default_hooks") or {}).get("checkpoint")
    if isinstance(checkpoint, dict) and _hook_class(checkpoint) is CheckpointHook:
        checkpoint["type"] = "mmseg.AtomicCheckpointHook"
        added.append(checkpoint["type"])
    return added
