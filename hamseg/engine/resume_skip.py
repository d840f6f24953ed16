"""Resume without loading the trained batches again: mmengine 0.10.7's ``IterBasedTrainLoop``
fast-forwards its dataloader over every trained batch (each image decoded and transformed, then
thrown away). :class:`ResumableInfiniteSampler` starts its index stream at any position instead,
and :func:`collate_with_worker_rng` tags each batch with the RNG state of the DataLoader worker
that made it, so that a resume at iteration N starts its workers where the uninterrupted run's
were and loads nothing twice. docs/robustness.md, "Exact resume"."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import torch
from mmengine.dataset import InfiniteSampler
from mmengine.registry import FUNCTIONS
from mmseg.registry import DATA_SAMPLERS
from torch.utils.data import get_worker_info

from .rng import get_rng_state, set_rng_state

#: The key of a batch (a dict) that carries ``(worker id, RNG state)`` from a worker.
WORKER_RNG = "hamseg_worker_rng"


@DATA_SAMPLERS.register_module()
class ResumableInfiniteSampler(InfiniteSampler):
    """mmengine's ``InfiniteSampler`` (the same indices in the same order for every seed, rank
    and world size) that can start at this rank's ``position``-th index (:meth:`start_at`)
    without producing the ones before: whole epochs are skipped by drawing their permutations
    from the generator without listing them."""

    def start_at(self, position: int) -> None:
        """Continue this rank's index stream from its ``position``-th index (0: the start)."""
        self.indices = self._indices_from(position)

    def _order(self, generator: torch.Generator) -> torch.Tensor:
        """One epoch's order, drawn as mmengine 0.10.7's ``_infinite_indices`` draws it."""
        if self.shuffle:
            return torch.randperm(self.size, generator=generator)
        return torch.arange(self.size)

    def _indices_from(self, position: int) -> Iterator[int]:
        generator = torch.Generator()
        generator.manual_seed(self.seed)
        # this rank's k-th index is the (k * world + rank)-th of the epochs laid end to end
        epochs, offset = divmod(position * self.world_size + self.rank, self.size)
        for _ in range(epochs):
            self._order(generator)  # keeps the generator in step; nothing is listed
        while True:
            yield from self._order(generator)[offset :: self.world_size].tolist()
            offset = (offset - self.size) % self.world_size  # where the next epoch starts


@FUNCTIONS.register_module()
def collate_with_worker_rng(data_batch: list, collate: dict | None = None) -> Any:
    """``collate`` (a ``FUNCTIONS`` config, default ``pseudo_collate``); in a DataLoader worker a
    dict batch also carries ``(worker id, RNG state after making it)`` under :data:`WORKER_RNG`
    (taken off again by :class:`TrainBatches` before the model sees the batch)."""
    options = dict(collate or dict(type="pseudo_collate"))
    kind = options.pop("type")
    batch = (FUNCTIONS.get(kind) if isinstance(kind, str) else kind)(data_batch, **options)
    worker = get_worker_info()
    if worker is not None and isinstance(batch, dict):
        batch[WORKER_RNG] = (worker.id, get_rng_state())
    return batch


class TrainBatches:
    """The train loop's batch iterator: takes the worker tags off each batch and keeps the
    latest state of every worker (numbered as in a run that never resumed: this iterator's
    worker j made the batches that worker ``(j + first) % n`` of that run made), and answers
    the first ``skip`` calls (mmengine's fast-forward) with None, loading nothing."""

    def __init__(
        self, inner: Iterator, workers: list | None, first: int = 0, skip: int = 0
    ) -> None:
        self.inner = inner
        self.workers = workers
        self.first = first
        self.skip = skip

    def __iter__(self) -> TrainBatches:
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
    """Worker init of a resumed run: the worker continues as worker ``(worker_id + first) % n``
    of the uninterrupted run (its seeding, then its saved state if it had made a batch)."""
    logical = (worker_id + first) % len(states)
    if init is not None:
        init(logical)
    if states[logical] is not None:
        set_rng_state(states[logical])


def worker_slots(loader: Any) -> list | None:
    """One slot per worker of ``loader`` for its latest state ([] without workers), or None if
    its batches carry no state (a collate function other than :func:`collate_with_worker_rng`)."""
    if loader.num_workers == 0:
        return []
    tagged = getattr(loader.collate_fn, "func", None) is collate_with_worker_rng
    return [None] * loader.num_workers if tagged else None


def can_skip(loop: Any, workers: list | None) -> bool:
    """Whether :func:`restart_at` can resume ``loop`` exactly: a ``ResumableInfiniteSampler``, a
    batch size, in-order batches, batches that carry their worker's state, and a saved state
    slot for every worker (``workers``, from the checkpoint)."""
    loader = loop.dataloader
    slots = worker_slots(loader)
    return (
        isinstance(loader.sampler, ResumableInfiniteSampler)
        and bool(loader.batch_size)
        and getattr(loader, "in_order", True)
        and slots is not None
        and (not slots or (workers is not None and len(workers) == len(slots)))
    )


def restart_at(loop: Any, batches: int, workers: list) -> TrainBatches:
    """Restart ``loop``'s data (a fresh iterator, new workers) at its ``batches``-th batch, the
    workers in the states of ``workers``; the loop's first ``batches`` calls load nothing."""
    loader = loop.dataloader
    loader.sampler.start_at(batches * loader.batch_size)
    init = loader.worker_init_fn
    if loader.num_workers:
        loader.worker_init_fn = functools.partial(
            _start_worker, init=init, states=workers, first=batches
        )
        # torch 2.x keeps persistent workers in this private attribute and has no public way to
        # restart them in the states the workers must resume from
        loader._iterator = None
    loop.dataloader_iterator = None  # the old iterator's workers stop with it
    inner = iter(loader)
    loader.worker_init_fn = init
    return TrainBatches(inner, workers, first=batches, skip=batches)
