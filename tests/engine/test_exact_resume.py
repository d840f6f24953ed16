"""Exact resume (hamseg/engine/resume.py): the sampler continues mmengine's order from any
position, and a resumed run loads only the batches it trains, bit-exact with an uninterrupted run
(in-process Runners on the tiny dataset, with and without DataLoader workers). The multi-rank
proofs are in test_preemption.py and test_launchers.py."""

import itertools
import os
import os.path as osp
import shutil

import pytest
import torch
from mmcv.transforms import BaseTransform
from mmengine.dataset import InfiniteSampler
from mmseg.registry import TRANSFORMS

from hamseg.engine import ResumableInfiniteSampler
from tests.helpers import one_thread  # noqa: F401  (fixture)
from tests.robust.helpers import tiny_cfg, train_until_stopped


@TRANSFORMS.register_module()
class CountCallsTransform(BaseTransform):
    """Appends one line to ``path`` per sample it sees (from any process)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def transform(self, results: dict) -> dict:
        with open(self.path, "a") as handle:
            handle.write(f"{results['img_path']}\n")
        return results


@pytest.mark.parametrize("size,world", [(5, 1), (7, 2), (5, 3), (1, 2)])
@pytest.mark.parametrize("shuffle", [True, False])
def test_the_sampler_continues_mmengines_order_from_any_position(size, world, shuffle, monkeypatch):
    for rank in range(world):
        monkeypatch.setattr("mmengine.dataset.sampler.get_dist_info", lambda r=rank: (r, world))
        expected = list(itertools.islice(InfiniteSampler(range(size), shuffle, seed=3), 60))
        ours = ResumableInfiniteSampler(range(size), shuffle, seed=3)
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
