"""Exact resume. mmengine 0.10.7 restores weights, optimizer, schedule and iteration, but not the
random generators, and it fast-forwards the dataloader over every trained batch (each image
decoded, transformed and thrown away). :class:`RandomStateHook` stores every rank's generator
states (its DataLoader workers' too) in each checkpoint and restores them;
:class:`ResumableInfiniteSampler` restarts the data at the resumed batch, loading nothing twice.
docs/robustness.md, "Exact resume"."""

from __future__ import annotations

import functools
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from mmengine.dataset import InfiniteSampler
from mmengine.dist import all_gather_object, get_rank, get_world_size
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.registry import FUNCTIONS
from mmseg.registry import DATA_SAMPLERS, HOOKS
from torch.utils.data import get_worker_info

#: The key of a batch (a dict) that carries ``(worker id, RNG state)`` from a worker.
WORKER_RNG = "hamseg_worker_rng"


def get_rng_state() -> dict:
    """Python's, numpy's and torch's (CPU, current CUDA device) generator states, in types that
    a ``weights_only`` checkpoint loads (numpy's key as an int64 tensor)."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    numpy = (kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), gauss)
    state = dict(python=random.getstate(), numpy=numpy, torch=torch.get_rng_state())
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    """Restore what :func:`get_rng_state` returned (the CUDA part only where CUDA is in use)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"].cpu())


@DATA_SAMPLERS.register_module()
class ResumableInfiniteSampler(InfiniteSampler):
    """mmengine's ``InfiniteSampler`` (the same indices in the same order for every seed, rank
    and world size) that can start at this rank's ``position``-th index: whole epochs are skipped
    by drawing their permutations without listing them."""

    def start_at(self, position: int) -> None:
        self.indices = self._indices_from(position)

    def _indices_from(self, position: int) -> Iterator[int]:
        generator = torch.Generator()
        generator.manual_seed(self.seed)
        order = functools.partial(torch.randperm, self.size, generator=generator)
        if not self.shuffle:
            order = functools.partial(torch.arange, self.size)
        # this rank's k-th index is the (k * world + rank)-th of the epochs laid end to end
        epochs, offset = divmod(position * self.world_size + self.rank, self.size)
        for _ in range(epochs):
            order()  # as mmengine 0.10.7's _infinite_indices draws it; nothing is listed
        while True:
            yield from order()[offset :: self.world_size].tolist()
            offset = (offset - self.size) % self.world_size  # where the next epoch starts


@FUNCTIONS.register_module()
def collate_with_worker_rng(data_batch: list, collate: dict | None = None) -> Any:
    """``collate`` (a ``FUNCTIONS`` config, default ``pseudo_collate``); in a DataLoader worker a
    dict batch also carries ``(worker id, RNG state after making it)`` under :data:`WORKER_RNG`,
    which :class:`RandomStateHook` takes off before the model sees the batch."""
    options = dict(collate or dict(type="pseudo_collate"))
    kind = options.pop("type")
    batch = (FUNCTIONS.get(kind) if isinstance(kind, str) else kind)(data_batch, **options)
    worker = get_worker_info()
    if worker is not None and isinstance(batch, dict):
        batch[WORKER_RNG] = (worker.id, get_rng_state())
    return batch


class _Batches:
    """The train loop's batch iterator: keeps each worker's latest state (numbered as in a run
    that never resumed: worker j of a run resumed at batch ``first`` made the batches that worker
    ``(j + first) % n`` made) and answers the first ``skip`` calls (mmengine's fast-forward)
    with None, loading nothing."""

    def __init__(self, inner: Iterator, workers: list | None, first: int = 0) -> None:
        self.inner = inner
        self.workers = workers
        self.first = first
        self.skip = 0

    def __iter__(self) -> _Batches:
        return self

    def __next__(self) -> Any:
        if self.skip:
            self.skip -= 1
            return None
        batch = next(self.inner)
        if isinstance(batch, dict) and WORKER_RNG in batch:
            worker, state = batch.pop(WORKER_RNG)
            if self.workers:
                self.workers[(worker + self.first) % len(self.workers)] = state
        return batch


def _start_worker(worker_id: int, init: Any, states: list, first: int) -> None:
    """A resumed run's worker continues as worker ``(worker_id + first) % n`` of the
    uninterrupted run: its seeding, then its saved state if it had made a batch."""
    logical = (worker_id + first) % len(states)
    if init is not None:
        init(logical)
    if states[logical] is not None:
        set_rng_state(states[logical])


def gather_rng_states(runner) -> None:
    """Every rank calls it before a checkpoint is written (a collective): all ranks' states go
    to the :class:`RandomStateHook` of the main rank, which writes them."""
    hook = next((h for h in runner.hooks if isinstance(h, RandomStateHook)), None)
    if hook is not None:
        hook.gathered = (runner.iter, all_gather_object(hook.own_state()))


@HOOKS.register_module()
class RandomStateHook(Hook):
    """Save every rank's generator states with each checkpoint (:func:`gather_rng_states`),
    restore each rank's own on resume with the same world size, undo validation's draws."""

    priority = "VERY_HIGH"

    def __init__(self) -> None:
        self.loaded: list | None = None
        self.gathered: tuple[int, list] | None = None  # (iteration, states of ranks 0..N-1)
        self.batches: _Batches | None = None
        self.before_val_state: dict | None = None

    def own_state(self) -> dict:
        return dict(get_rng_state(), workers=self.batches and self.batches.workers)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        fresh = self.gathered is not None and self.gathered[0] == runner.iter
        checkpoint["rng_state"] = self.gathered[1] if fresh else [self.own_state()]

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        self.loaded = checkpoint.get("rng_state")  # used only if this load is a resume

    def before_train(self, runner) -> None:
        """After a resume, restore this rank's generators: at once where the data restarts at
        the sampler, else after loading the trained batches again (mmengine's replay, done
        here); without a resume, only take the workers' states off the batches."""
        states = self.loaded
        self.loaded = None
        own = None
        if states is not None and runner.iter > 0:  # a resume, not load_from's weights
            if len(states) == get_world_size():
                own = states[get_rank()]
            else:
                print_log(
                    f"the checkpoint holds the random states of {len(states)} rank(s), this run "
                    f"has {get_world_size()}: not restored, so the resumed run is not exact "
                    "(same world size: exact)",
                    "current",
                )
        loop = runner.train_loop
        if getattr(loop, "dataloader_iterator", None) is None:  # epoch-based: restarts its epoch
            if own is not None:
                set_rng_state(own)
            return
        loader = loop.dataloader
        done = runner.iter if own is not None else 0  # batches to skip or to load again here
        tagged = getattr(loader.collate_fn, "func", None) is collate_with_worker_rng
        slots = [None] * loader.num_workers if tagged else None
        saved = own.get("workers") if own is not None else None
        if done and self._can_restart(loader, slots, saved):
            if loader.num_workers:
                init = loader.worker_init_fn
                loader.worker_init_fn = functools.partial(
                    _start_worker, init=init, states=saved, first=done
                )
                # torch keeps persistent workers in this private attribute, with no public way
                # to restart them (pinned by tests/engine/test_upstream_pins.py)
                loader._iterator = None
            loop.dataloader_iterator = None  # the old iterator's workers stop with it
            loader.sampler.start_at(done * loader.batch_size)
            self.batches = _Batches(iter(loader), list(saved or []), first=done)
            if loader.num_workers:
                loader.worker_init_fn = init
            print_log(
                f"resuming at iteration {done}: {done} trained batches skipped at the "
                "sampler, none loaded",
                "current",
            )
        else:
            self.batches = _Batches(loop.dataloader_iterator, slots if loader.num_workers else [])
            for _ in range(done):
                next(self.batches)
        self.batches.skip = done
        loop.dataloader_iterator = self.batches
        if own is not None:
            set_rng_state(own)

    @staticmethod
    def _can_restart(loader: Any, slots: list | None, saved: list | None) -> bool:
        """A ``ResumableInfiniteSampler``, in-order batches that carry their worker's state
        (none without workers), and a saved state slot for every worker."""
        return (
            isinstance(loader.sampler, ResumableInfiniteSampler)
            and bool(loader.batch_size)
            and getattr(loader, "in_order", True)
            and (not loader.num_workers or (slots is not None and len(saved or []) == len(slots)))
        )

    def before_val(self, runner) -> None:
        self.before_val_state = get_rng_state()

    def after_val(self, runner) -> None:
        if self.before_val_state is not None:
            set_rng_state(self.before_val_state)
            self.before_val_state = None
