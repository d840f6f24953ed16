"""Exact resume: mmengine 0.10.7 restores weights, optimizer, schedule and sampler, but not the
random generators. :class:`RandomStateHook` stores every rank's (and its DataLoader workers') in
each checkpoint, restores each rank's own on resume (the data restarts at the sampler,
:mod:`.resume_skip`; else after mmengine's fast-forward, which replays the workers' draws), and
keeps validation from consuming them. docs/robustness.md, "Exact resume"."""

from __future__ import annotations

from typing import Any

from mmengine.dist import all_gather_object, get_rank, get_world_size
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmseg.registry import HOOKS

from .resume_skip import TrainBatches, can_skip, restart_at, worker_slots
from .rng import get_rng_state, set_rng_state


class _RestoreAfterSkip:
    """The train loop's dataloader iterator during resume's fast-forward: after the last skipped
    batch it restores the generators and gives the loop its iterator back."""

    def __init__(self, loop: Any, skips: int, state: dict) -> None:
        self.loop = loop
        self.inner = loop.dataloader_iterator
        self.left = skips
        self.state = state

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
        hook.gathered = (runner.iter, all_gather_object(hook.own_state()))


@HOOKS.register_module()
class RandomStateHook(Hook):
    """Save every rank's generator states (its DataLoader workers' too) with each checkpoint
    (:func:`gather_rng_states`), restore each rank's own on resume with the same world size, undo
    validation's draws."""

    priority = "VERY_HIGH"

    def __init__(self) -> None:
        self._loaded: list | None = None
        self._before_val: dict | None = None
        self.gathered: tuple[int, list] | None = None  # (iteration, states of ranks 0..N-1)
        self.batches: TrainBatches | None = None  # the train loop's, once training starts

    def own_state(self) -> dict:
        """This rank's generator states, with its DataLoader workers' (None: not known)."""
        workers = self.batches.workers if self.batches is not None else None
        return dict(get_rng_state(), workers=workers)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        fresh = self.gathered is not None and self.gathered[0] == runner.iter
        checkpoint["rng_state"] = self.gathered[1] if fresh else [self.own_state()]

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        state = checkpoint.get("rng_state")  # used only if this load is a resume
        self._loaded = [state] if isinstance(state, dict) else state  # older: one dict

    def before_train(self, runner) -> None:
        """Take the workers' states off every batch. After a resume, restore the generators: at
        once where the data restarts at the sampler (:func:`restart_at`, nothing loaded twice),
        else once mmengine's fast-forward has loaded the trained batches again."""
        states = self._loaded
        self._loaded = None
        own = None
        if states is not None and runner.iter > 0:  # a resume (not load_from's weights only)
            if len(states) == get_world_size():
                own = states[get_rank()]
            else:
                has = f"{len(states)} rank(s), this run has {get_world_size()}: not restored"
                print_log(f"the checkpoint holds the random states of {has}{_INEXACT}", "current")
        loop = runner.train_loop
        if getattr(loop, "dataloader_iterator", None) is None:  # epoch-based: restarts its epoch
            if own is not None:
                set_rng_state(own)
            return
        if own is not None and can_skip(loop, own.get("workers")):
            self.batches = restart_at(loop, runner.iter, list(own.get("workers") or []))
            set_rng_state(own)  # after the new iterator drew its base seed
            skipped = f"{runner.iter} trained batches skipped at the sampler, none loaded"
            print_log(f"resuming at iteration {runner.iter}: {skipped}", "current")
        else:
            workers = worker_slots(loop.dataloader)
            self.batches = TrainBatches(loop.dataloader_iterator, workers)
        loop.dataloader_iterator = self.batches
        if own is not None and self.batches.skip == 0:  # mmengine's fast-forward loads them
            loop.dataloader_iterator = _RestoreAfterSkip(loop, runner.iter, own)

    def before_val(self, runner) -> None:
        self._before_val = get_rng_state()

    def after_val(self, runner) -> None:
        if self._before_val is not None:
            set_rng_state(self._before_val)
            self._before_val = None
