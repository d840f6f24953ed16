"""Mixed precision (--amp: bf16 autocast on CPU) and determinism of training and evaluation.

All runs are in-process mmengine Runners built from tests/data/tiny_ham.py, exactly what
tools/train.py and tools/test.py build (``--amp`` is :func:`hamseg.cli.enable_amp`).
"""

from __future__ import annotations

import math
import os.path as osp

import pytest
import torch
from mmengine.hooks import Hook

from hamseg.cli import enable_amp
from tests.robust.helpers import LossRecorder, build_runner, tiny_cfg


@pytest.fixture
def restore_determinism():
    """deterministic=True switches torch to deterministic algorithms process-wide: undo it."""
    before = torch.are_deterministic_algorithms_enabled()
    yield
    torch.use_deterministic_algorithms(before)


def train_losses(data: str, work: str, options: dict) -> tuple[list[float], object]:
    runner = build_runner(tiny_cfg(data, work, {"train_cfg.max_iters": 20, **options}))
    recorder = LossRecorder()
    runner.register_hook(recorder)
    runner.train()
    return recorder.losses, runner


@pytest.mark.slow
def test_amp_bf16_training_runs_with_float32_decomposition(tmp_path, tiny_data):
    cfg = tiny_cfg(tiny_data, str(tmp_path / "amp"), {"train_cfg.max_iters": 20})
    enable_amp(cfg)  # what --amp does
    assert cfg.optim_wrapper.type == "CPUAmpOptimWrapper" and cfg.optim_wrapper.dtype == "bfloat16"
    runner = build_runner(cfg)
    recorder = LossRecorder()
    runner.register_hook(recorder)

    ham = runner.model.decode_head.hamburger.ham
    seen_outside, seen_inside = set(), set()
    local_step = ham.local_step  # one iteration of Alg. 1, public

    def spy(x, *args):
        seen_inside.add((x.dtype, torch.is_autocast_enabled("cpu")))
        return local_step(x, *args)

    ham.local_step = spy
    ham.register_forward_pre_hook(
        lambda m, args: seen_outside.add(args[0].dtype) if m.training else None
    )
    runner.train()

    assert type(runner.optim_wrapper).__name__ == "CPUAmpOptimWrapper"
    assert len(recorder.losses) == 20
    assert all(math.isfinite(loss) for loss in recorder.losses), recorder.losses
    assert seen_outside == {torch.bfloat16}  # autocast really is on around the ham
    assert seen_inside <= {(torch.float32, False)} and seen_inside  # ...and off inside it


@pytest.mark.slow
def test_fixed_seed_deterministic_runs_give_identical_losses(
    tmp_path, tiny_data, restore_determinism
):
    options = {"randomness": dict(seed=0, deterministic=True)}
    first, _ = train_losses(tiny_data, str(tmp_path / "a"), options)
    second, _ = train_losses(tiny_data, str(tmp_path / "b"), options)
    assert len(first) == 20 and first == second  # bit for bit
    other, _ = train_losses(tiny_data, str(tmp_path / "c"), {"randomness": dict(seed=1)})
    assert other != first  # the seed matters: the comparison above has teeth


class LogitsRecorder(Hook):
    def __init__(self) -> None:
        self.logits: list[torch.Tensor] = []

    def after_test_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.logits += [sample.seg_logits.data.clone() for sample in outputs]


def evaluate(data: str, work: str, checkpoint: str, seed: int, eval_seed):
    options = {
        "load_from": checkpoint,
        "randomness": dict(seed=seed),
        "model.decode_head.ham_cfg.eval_seed": eval_seed,
    }
    runner = build_runner(tiny_cfg(data, work, options))
    recorder = LogitsRecorder()
    runner.register_hook(recorder)
    metrics = runner.test()
    return metrics["mIoU"], torch.cat([logits.flatten() for logits in recorder.logits])


@pytest.mark.slow
def test_seeded_evaluation_gives_identical_miou(tmp_path, tiny_data):
    _, runner = train_losses(tiny_data, str(tmp_path / "train"), {"train_cfg.max_iters": 10})
    checkpoint = osp.join(str(tmp_path / "train"), "iter_10.pth")
    assert osp.isfile(checkpoint)
    # Different global seeds (as two separate tools/test.py invocations would have).
    miou_a, logits_a = evaluate(tiny_data, str(tmp_path / "e1"), checkpoint, 1, eval_seed=0)
    miou_b, logits_b = evaluate(tiny_data, str(tmp_path / "e2"), checkpoint, 2, eval_seed=0)
    assert miou_a == miou_b
    assert torch.equal(logits_a, logits_b)
    # Without the option the random dictionary makes the outputs differ run to run.
    _, free_a = evaluate(tiny_data, str(tmp_path / "e3"), checkpoint, 1, eval_seed=None)
    _, free_b = evaluate(tiny_data, str(tmp_path / "e4"), checkpoint, 2, eval_seed=None)
    assert not torch.equal(free_a, free_b)
