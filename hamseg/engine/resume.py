"""Exact resume: mmengine 0.10.7 restores no random generator and re-loads every trained batch.
docs/robustness.md, "Exact resume"."""

import functools
import itertools
import random
from collections.abc import Callable, Iterator

import numpy as np
import torch
from mmengine.dataset import InfiniteSampler
from mmengine.dist import get_rank
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.registry import FUNCTIONS
from mmseg.registry import DATA_SAMPLERS, HOOKS
from torch.utils.data import get_worker_info

_WORKER: dict = {}  # in a DataLoader worker: the run's seed, the rank, its next batch


def seed_all(*key: int) -> None:
    """Seed Python's, numpy's and torch's generators from ``key``."""
    seed = int(np.random.SeedSequence(key).generate_state(1)[0])
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def start_worker(worker_id: int, init: Callable, seed: int, rank: int, first: int) -> None:
    """Worker ``worker_id`` of n makes batches ``first + worker_id + k n`` (in-order loading)."""
    init(worker_id)  # mmengine's
    _WORKER.update(seed=seed, rank=rank, batch=first + worker_id)
    seed_all(seed, rank, _WORKER["batch"])


@FUNCTIONS.register_module()
def collate_with_worker_rng(data_batch: list, collate: dict | None = None) -> object:
    """``collate`` (a ``FUNCTIONS`` config, default ``pseudo_collate``); then seed the worker (one
    that :class:`RandomStateHook` started) for its next batch."""
    options = dict(collate or dict(type="pseudo_collate"))
    kind = options.pop("type")
    batch = (FUNCTIONS.get(kind) if isinstance(kind, str) else kind)(data_batch, **options)
    if _WORKER:
        _WORKER["batch"] += get_worker_info().num_workers
        seed_all(_WORKER["seed"], _WORKER["rank"], _WORKER["batch"])
    return batch


@DATA_SAMPLERS.register_module()
class ResumableInfiniteSampler(InfiniteSampler):
    """mmengine's ``InfiniteSampler`` that can start at this rank's ``position``-th index."""

    def start_at(self, position: int) -> None:
        # the skipped indices are drawn, not loaded (mmengine's private method: test_upstream_pins)
        self.indices = itertools.islice(self._indices_of_rank(), position, None)


def _seeded(batches: Iterator, seed: int, start: int) -> Iterator:
    for iteration in itertools.count(start):
        seed_all(seed, iteration)  # before the batch: its loading in this process, its training
        yield next(batches)


@HOOKS.register_module()
class RandomStateHook(Hook):
    """Seed every training iteration from ``runner.seed`` (mmengine's, the rank's with
    ``diff_rank_seed``) and the iteration; restart the data at the resumed batch with
    :class:`ResumableInfiniteSampler`, workers seeded per batch by ``collate_with_worker_rng``."""

    priority = "VERY_HIGH"

    def before_train(self, runner) -> None:
        loop, done = runner.train_loop, runner.iter  # iterations trained before a resume
        if getattr(loop, "dataloader_iterator", None) is None:  # epoch-based: not exact
            return
        loader = loop.dataloader
        seeded = getattr(loader.collate_fn, "func", None) is collate_with_worker_rng
        if (
            isinstance(loader.sampler, ResumableInfiniteSampler)
            and getattr(loader, "in_order", True)
            and (seeded or not loader.num_workers)
        ):
            init = dict(init=loader.worker_init_fn, seed=runner.seed, rank=get_rank())
            loader.worker_init_fn = functools.partial(start_worker, **init, first=done)
            loader._iterator = None  # torch's persistent workers (pinned by test_upstream_pins)
            loader.sampler.start_at(done * loader.batch_size)
            loop.dataloader_iterator = iter(loader)  # the old workers stop with the old one
            if done:
                skipped = f"{done} trained batches skipped at the sampler"
                print_log(f"resuming at iteration {done}: {skipped}", "current")
        else:  # mmengine's replay of the trained batches, done here
            for _ in range(done):
                next(loop.dataloader_iterator)
        batches = _seeded(loop.dataloader_iterator, runner.seed, done)
        loop.dataloader_iterator = itertools.chain(itertools.repeat(None, done), batches)
