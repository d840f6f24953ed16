"""Exact resume: mmengine 0.10.7 restores weights, optimizer, schedule and sampler, but not the
random generators. :class:`RandomStateHook` stores them in every checkpoint, restores them after
resume's fast-forward over the trained batches, and keeps validation from consuming them.
docs/robustness.md, "Exact resume"."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch
from mmengine.dist import get_world_size
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


@HOOKS.register_module()
class RandomStateHook(Hook):
    """Save the generators' states (the main rank's) with every checkpoint, restore them on
    resume (every rank; not with ``diff_rank_seed=True``), and undo validation's draws."""

    priority = "VERY_HIGH"

    def __init__(self) -> None:
        self._loaded: dict | None = None
        self._before_val: dict | None = None

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        checkpoint["rng_state"] = get_rng_state()

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        self._loaded = checkpoint.get("rng_state")  # used only if this load is a resume

    def before_train(self, runner) -> None:
        """After a resume, restore the generators once the trained batches are skipped."""
        state, self._loaded = self._loaded, None
        if state is None or runner.iter == 0:
            return  # a new run (load_from weights only) keeps its seeded generators
        if get_world_size() > 1 and (runner.cfg.get("randomness") or {}).get("diff_rank_seed"):
            print_log("diff_rank_seed=True: random states are not restored", logger="current")
        elif getattr(runner.train_loop, "dataloader_iterator", None) is not None:  # iter-based
            loop = runner.train_loop
            loop.dataloader_iterator = _RestoreAfterSkip(loop, runner.iter, state)
        else:  # an epoch-based loop restarts its epoch: no fast-forward to wait for
            set_rng_state(state)

    def before_val(self, runner) -> None:
        self._before_val = get_rng_state()

    def after_val(self, runner) -> None:
        if self._before_val is not None:
            set_rng_state(self._before_val)
            self._before_val = None
