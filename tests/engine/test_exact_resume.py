"""Exact resume (hamseg/engine/resume.py): generator states survive a weights_only checkpoint,
every rank's are saved, the sampler continues mmengine's order from any position, and a resumed
run loads only the batches it trains, bit-exact with an uninterrupted run (in-process Runners on
the tiny dataset, with and without DataLoader workers). The multi-rank proofs are in
test_preemption.py and test_launchers.py."""

from __future__ import annotations

import itertools
import os
import os.path as osp
import random
import shutil
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from mmcv.transforms import BaseTransform
from mmengine.dataset import InfiniteSampler
from mmseg.registry import TRANSFORMS

from hamseg.engine import RandomStateHook, ResumableInfiniteSampler
from hamseg.engine.resume import gather_rng_states, get_rng_state, set_rng_state
from tests.helpers import one_thread  # noqa: F401  (fixture)
from tests.robust.helpers import tiny_cfg, train_until_stopped


def draws() -> tuple:
    return random.random(), float(np.random.rand()), np.random.randn(), torch.rand(3).tolist()


def test_states_round_trip_through_a_weights_only_checkpoint(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.randn()  # a cached Gaussian is part of numpy's state
    path = str(tmp_path / "iter_1.pth")
    torch.save(dict(rng_state=get_rng_state()), path)
    expected = draws()
    assert draws() != expected  # the generators moved on
    set_rng_state(torch.load(path, weights_only=True)["rng_state"])
    assert draws() == expected


def test_every_ranks_state_is_saved_and_another_world_size_is_not_restored():
    hook = RandomStateHook()
    runner = SimpleNamespace(hooks=[hook], iter=7, train_loop=SimpleNamespace())
    gather_rng_states(runner)  # one rank here: all_gather_object gives [its state]
    checkpoint: dict = {}
    hook.before_save_checkpoint(runner, checkpoint)
    assert len(checkpoint["rng_state"]) == 1
    expected = draws()
    hook.after_load_checkpoint(runner, checkpoint)
    hook.before_train(runner)  # epoch-based (no dataloader_iterator): restored at once
    assert draws() == expected
    hook.after_load_checkpoint(runner, dict(rng_state=checkpoint["rng_state"] * 2))  # 2 ranks
    state = get_rng_state()
    hook.before_train(runner)
    after = draws()
    set_rng_state(state)
    assert draws() == after  # not restored: the generators went on where they were


@TRANSFORMS.register_module()
class CountCallsTransform(BaseTransform):
    """Appends one line to ``path`` per sample it sees (from any process)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def transform(self, results: dict) -> dict:
        with open(self.path, "a") as handle:
            handle.write(f"{results['img_path']}\n")
        return results


def sampler(cls, size: int, rank: int, world: int, shuffle: bool, monkeypatch):
    monkeypatch.setattr("mmengine.dataset.sampler.get_dist_info", lambda: (rank, world))
    return cls(list(range(size)), shuffle=shuffle, seed=3)


@pytest.mark.parametrize("size,world", [(5, 1), (7, 2), (5, 3), (1, 2)])
@pytest.mark.parametrize("shuffle", [True, False])
def test_the_sampler_continues_mmengines_order_from_any_position(size, world, shuffle, monkeypatch):
    for rank in range(world):
        reference = sampler(InfiniteSampler, size, rank, world, shuffle, monkeypatch)
        expected = list(itertools.islice(iter(reference), 60))
        ours = sampler(ResumableInfiniteSampler, size, rank, world, shuffle, monkeypatch)
        assert list(itertools.islice(iter(ours), 60)) == expected  # untouched: the same
        for start in (0, 1, size - 1, size, 2 * size + 1, 23):
            ours.start_at(start)
            assert list(itertools.islice(iter(ours), 30)) == expected[start : start + 30]


def train(work: str, data: str, counter: str, options: dict, resume_from: str | None = None):
    cfg = tiny_cfg(data, work, options)
    pipeline = cfg.train_dataloader.dataset.pipeline
    pipeline.insert(2, dict(type="CountCallsTransform", path=counter))
    pipeline.insert(3, dict(type="RandomFlip", prob=0.5))  # draws in the loading process
    if resume_from is not None:
        cfg.resume, cfg.load_from = True, resume_from
    stop, runner = train_until_stopped(cfg)
    assert stop is None
    return runner


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize(
    "kind,workers,most",
    [
        ("mmseg.ResumableInfiniteSampler", 0, 3 * 2),
        # workers prefetch 2 batches each: the first iterator (built before the checkpoint is
        # read, stopped at once) and the last iteration's, whatever the iteration resumed
        pytest.param("mmseg.ResumableInfiniteSampler", 2, (3 + 4 + 4) * 2, marks=pytest.mark.slow),
        # mmengine's: every trained batch loaded again (what the bounds above rule out)
        pytest.param("InfiniteSampler", 0, 12 * 2, marks=pytest.mark.slow),
    ],
)
def test_a_resume_loads_only_the_batches_it_trains_and_ends_exact(
    tmp_path, tiny_data, kind, workers, most
):
    options = {
        "train_cfg.max_iters": 12,
        "param_scheduler.0.end": 12,
        "default_hooks.checkpoint.interval": 9,  # odd: the workers' turns move on resume
        "randomness": dict(seed=5, deterministic=True),
        "custom_hooks": [dict(type="RandomStateHook")],
        "train_dataloader.sampler.type": kind,
        "train_dataloader.num_workers": workers,
        "train_dataloader.persistent_workers": workers > 0,
        "train_dataloader.collate_fn": dict(type="collate_with_worker_rng"),
    }
    straight, resumed = str(tmp_path / "straight"), str(tmp_path / "resumed")
    train(straight, tiny_data, str(tmp_path / "straight.log"), options)
    os.makedirs(resumed)
    late = shutil.copy(osp.join(straight, "iter_9.pth"), resumed)
    counter = str(tmp_path / "resumed.log")
    runner = train(resumed, tiny_data, counter, options, resume_from=late)
    assert runner.iter == 12
    loaded = len(open(counter).read().splitlines())
    assert 3 * 2 <= loaded <= most  # 3 iterations of batch 2 trained after the resume
    got = torch.load(osp.join(resumed, "iter_12.pth"))["state_dict"]
    want = torch.load(osp.join(straight, "iter_12.pth"))["state_dict"]
    for name, value in want.items():
        assert torch.equal(got[name], value), name
