"""Exact resume: mmengine 0.10.7 restores weights, optimizer, schedule and sampler, but not the
random generators. :class:`RandomStateHook` stores every rank's in each checkpoint, restores each
rank's own after resume's fast-forward (which replays the DataLoader workers' draws), and keeps
validation from consuming them. docs/robustness.md, "Exact resume"."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch
from mmengine.dist import all_gather_object, get_rank, get_world_size
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmseg.registry import HOOKS


def get_rng_state() -> dict:
    """Python's, numpy's and torch's (CPU, current CUDA device) global generator states, in
    types that load with ``weights_only=True`` (numpy's key as an int64 tensor)."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    numpy = dict(kind=kind, keys=torch.from_numpy(keys.astype(np.int64)), pos=int(pos))
    numpy.update(has_gauss=int(has_gauss), gauss=float(gauss))
    state = dict(python=random.getstate(), numpy=numpy, torch=torch.get_rng_state())
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    """Restore what :func:`get_rng_state` returned (the CUDA part only where CUDA is in use)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    keys = n["keys"].numpy().astype(np.uint32)
    np.random.set_state((n["kind"], keys, n["pos"], n["has_gauss"], n["gauss"]))
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"].cpu())


class _RestoreAfterSkip:
    """The train loop's dataloader iterator during resume's fast-forward: after the last skipped
    batch it restores the generators and gives the loop its iterator back."""

    def __init__(self, loop: Any, skips: int, state: dict) -> None:
        self.loop, self.inner, self.left, self.state = loop, loop.dataloader_iterator, skips, state

    def __iter__(self) -> _RestoreAfterSkip:
        return self

    def __next__(self) -> Any:
        batch = next(self.inner)
        self.left -= 1
        if self.left == 0:
            set_rng_state(self.state)
            self.loop.dataloader_iterator = self.inner
        return batch


_INEXACT = ", so the resumed run is not exact (same world size: exact)"


def gather_rng_states(runner) -> None:
    """Every rank calls it before a checkpoint is written: all ranks' states go to the
    :class:`RandomStateHook` of the main rank, which writes them (a collective)."""
    hook = next((h for h in runner.hooks if isinstance(h, RandomStateHook)), None)
    if hook is not None:
        hook.gathered = (runner.iter, all_gather_object(get_rng_state()))


@HOOKS.register_module()
class RandomStateHook(Hook):
    """Save every rank's generator states with each checkpoint (:func:`gather_rng_states`),
    restore each rank's own on resume with the same world size, undo validation's draws."""

    priority = "VERY_HIGH"

    def __init__(self) -> None:
        self._loaded: list | None = None
        self._before_val: dict | None = None
        self.gathered: tuple[int, list] | None = None  # (iteration, states of ranks 0..N-1)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        fresh = self.gathered is not None and self.gathered[0] == runner.iter
        checkpoint["rng_state"] = self.gathered[1] if fresh else [get_rng_state()]

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        state = checkpoint.get("rng_state")  # used only if this load is a resume
        self._loaded = [state] if isinstance(state, dict) else state  # older: one dict

    def before_train(self, runner) -> None:
        """After a resume, restore the generators once the trained batches are skipped."""
        states, self._loaded = self._loaded, None
        if states is None or runner.iter == 0:
            return  # a new run (load_from weights only) keeps its seeded generators
        if len(states) != get_world_size():
            has = f"{len(states)} rank(s), this run has {get_world_size()}: not restored"
            print_log(f"the checkpoint holds the random states of {has}{_INEXACT}", "current")
        elif getattr(runner.train_loop, "dataloader_iterator", None) is not None:  # iter-based
            loop = runner.train_loop
            loop.dataloader_iterator = _RestoreAfterSkip(loop, runner.iter, states[get_rank()])
        else:  # an epoch-based loop restarts its epoch: no fast-forward to wait for
            set_rng_state(states[get_rank()])

    def before_val(self, runner) -> None:
        self._before_val = get_rng_state()

    def after_val(self, runner) -> None:
        if self._before_val is not None:
            set_rng_state(self._before_val)
            self._before_val = None
