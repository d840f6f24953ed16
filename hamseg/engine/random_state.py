"""Resume that continues the random streams exactly: RNG states in every checkpoint.

mmengine's resume restores weights, optimizer, schedule and iteration, and replays the
``InfiniteSampler`` (it reseeds it and draws the skipped batches again), but not the random
generators: a resumed run draws other random numbers than the uninterrupted one would have
(the Hamburger's random initial dictionaries in training, random augmentations in the main
process, dropout). :class:`RandomStateHook` (``tools/train.py`` adds it to every config that has
none) closes the gap:

* every checkpoint gets ``rng_state``: Python's ``random``, numpy's global generator, torch's CPU
  generator and, with CUDA, the current device's generator, as the main rank has them right
  after the iteration (numpy's key is stored as an int64 tensor: checkpoints load with
  ``weights_only=True``);
* on resume the states are restored once mmengine has fast-forwarded the dataloader past the
  trained batches (with ``num_workers=0`` that fast-forward runs the transforms, and their
  random draws, again), right before the first new batch is drawn;
* a validation run inside training leaves the generators as it found them, so the training
  streams do not depend on when (or whether) validation ran, e.g. a pre-emption checkpoint that
  skipped the validation of its iteration.

With the same seed (the checkpoint's, which ``tools/train.py --resume`` uses when the config
sets none), an interrupted and resumed run then ends with the same weights, bit for bit, as an
uninterrupted one on the same hardware and settings. Distributed runs store the main rank's
states; with mmengine's default ``diff_rank_seed=False`` every rank draws the same numbers, so
each rank restores them; with ``diff_rank_seed=True`` nothing is restored.
"""

from __future__ import annotations

import random
from typing import Any, Optional

import numpy as np
import torch
from mmengine.dist import get_world_size
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmseg.registry import HOOKS

__all__ = ["RandomStateHook", "get_rng_state", "set_rng_state"]

KEY = "rng_state"


def get_rng_state() -> dict:
    """The state of Python's, numpy's and torch's (CPU, current CUDA device) global generators."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state = dict(
        python=random.getstate(),
        numpy=dict(
            kind=kind,
            keys=torch.from_numpy(keys.astype(np.int64)),
            pos=int(pos),
            has_gauss=int(has_gauss),
            gauss=float(gauss),
        ),
        torch=torch.get_rng_state(),
    )
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    """Restore what :func:`get_rng_state` returned (the CUDA part only where CUDA is in use)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    numpy = state["numpy"]
    keys = numpy["keys"].numpy().astype(np.uint32)
    np.random.set_state((numpy["kind"], keys, numpy["pos"], numpy["has_gauss"], numpy["gauss"]))
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"].cpu())


class _RestoreAfterSkip:
    """Stands in for the train loop's dataloader iterator during resume's fast-forward: after
    the last skipped batch it restores the generators and hands the loop its iterator back."""

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
    """Save the generators' state with every checkpoint, restore it on resume, and keep
    validation from consuming the training streams."""

    priority = "VERY_HIGH"

    def __init__(self) -> None:
        self._loaded: Optional[dict] = None
        self._before_val: Optional[dict] = None

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        checkpoint[KEY] = get_rng_state()

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        self._loaded = checkpoint.get(KEY)  # used only if this load is a resume (iter > 0)

    def before_train(self, runner) -> None:
        """After a resume, restore the generators once the trained batches are skipped."""
        state, self._loaded = self._loaded, None
        if state is None or runner.iter == 0:
            return  # a fresh run (load_from weights only) keeps the seeded generators
        randomness = runner.cfg.get("randomness") or {}
        if get_world_size() > 1 and randomness.get("diff_rank_seed", False):
            print_log("diff_rank_seed=True: random states are not restored", logger="current")
            return
        loop = runner.train_loop
        if getattr(loop, "dataloader_iterator", None) is not None:  # IterBasedTrainLoop
            loop.dataloader_iterator = _RestoreAfterSkip(loop, runner.iter, state)
        else:  # an epoch-based loop restarts its epoch: no fast-forward to wait for
            set_rng_state(state)

    def before_val(self, runner) -> None:
        self._before_val = get_rng_state()

    def after_val(self, runner) -> None:
        if self._before_val is not None:
            set_rng_state(self._before_val)
            self._before_val = None
