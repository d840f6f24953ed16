"""NonFiniteLossHook: a diverged run stops with one error, before any checkpoint of bad weights.

In-process runs of tests/data/tiny_fcn.py with a huge learning rate, and fp16 runs on the CPU
with torch's real ``GradScaler`` (``CPUAmpOptimWrapper(dtype='float16', loss_scale=...)``),
whose skipped steps are not divergence up to ``max_consecutive_skips``. The slow tests run
tools/train.py (exit code 65) and two torchrun ranks of which only one sees a non-finite loss.
"""

from __future__ import annotations

import os
import os.path as osp
import re
import sys

import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook

import hamseg.engine.cpu  # noqa: F401  (registers CPUAmpOptimWrapper, opt-in)
from hamseg.engine.stop import DIVERGED_EXIT_CODE, TrainingDiverged
from tests.conftest import REPO, TINY_FCN
from tests.helpers import one_thread  # noqa: F401  (fixture)
from tests.robust.helpers import (
    data_options,
    finish,
    run_tool,
    start_process,
    train_until_stopped,
)

pytestmark = pytest.mark.usefixtures("one_thread")

TRAIN = osp.join(REPO, "tools", "train.py")


def fcn_cfg(data: str, work: str, options: dict) -> Config:
    cfg = Config.fromfile(TINY_FCN)
    cfg.merge_from_dict({f"{s}_dataloader.dataset.data_root": data for s in ("train", "val")})
    cfg.merge_from_dict(options)
    cfg.work_dir, cfg.launcher = work, "none"
    cfg.visualizer.name = cfg.experiment_name = osp.basename(work) + str(id(cfg))
    return cfg


def non_finite_entries(checkpoint, prefix: str = "") -> list[str]:
    """Paths of every floating tensor in a checkpoint (weights, optimizer, ...) that is not
    finite."""
    if torch.is_tensor(checkpoint):
        ok = not checkpoint.is_floating_point() or bool(torch.isfinite(checkpoint).all())
        return [] if ok else [prefix]
    if isinstance(checkpoint, dict):
        items = checkpoint.items()
    elif isinstance(checkpoint, (list, tuple)):
        items = enumerate(checkpoint)
    else:
        return []
    return [bad for k, v in items for bad in non_finite_entries(v, f"{prefix}/{k}")]


class Recorder(Hook):
    """Loss, loss scale and a parameter of every iteration (runs after NonFiniteLossHook)."""

    priority = 85

    def __init__(self) -> None:
        self.rows: list[tuple] = []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        scaler = getattr(runner.optim_wrapper, "loss_scaler", None)
        weight = runner.model.decode_head.conv_seg.weight.detach().clone()
        loss = float(outputs["loss"].detach())
        self.rows.append((loss, scaler.get_scale() if scaler else None, weight))


def train(cfg: Config) -> tuple[TrainingDiverged | None, Recorder]:
    recorder = Recorder()
    error, _ = train_until_stopped(cfg, recorder)
    assert error is None or isinstance(error, TrainingDiverged)
    return error, recorder


@pytest.mark.parametrize(
    "lr,pattern",
    [
        (1e8, r"^non-finite loss at iteration (\d+) \(loss=nan, decode.loss_ce=nan\)"),
        # a finite loss whose update overflows (here BN's running variances first): caught
        # before iter_N.pth holds the inf tensors, which the message names
        (
            1e4,
            r"^non-finite parameters or buffers after iteration (\d+) \(loss=[0-9.e+]+, "
            r"decode.loss_ce=[0-9.e+]+; non-finite: backbone.stem.4.running_var, "
            r"[\w.]+, [\w.]+ and \d+ more\)",
        ),
    ],
)
def test_huge_learning_rate_stops_before_saving_non_finite_weights(
    tmp_path, tiny_data, recwarn, lr, pattern
):
    work = str(tmp_path / "work")
    options = {
        "optim_wrapper.optimizer.lr": lr,
        "default_hooks.checkpoint.interval": 1,
        "default_hooks.checkpoint.max_keep_ckpts": 2,
        "train_cfg.max_iters": 10,
        "custom_hooks": [dict(type="NonFiniteLossHook")],
    }
    error, recorder = train(fcn_cfg(tiny_data, work, options))
    assert error is not None and error.exit_code == DIVERGED_EXIT_CODE == 65
    step = int(re.match(pattern, str(error)).group(1))
    assert 2 <= step <= 6 and len(recorder.rows) == step - 1  # the recorder (85) never saw it
    latest = osp.join(work, f"iter_{step - 1}.pth")
    assert str(error).endswith(
        f"stopped without saving these weights (the latest checkpoint is {latest})"
    )
    names = sorted(n for n in os.listdir(work) if n.endswith(".pth"))
    assert names == [f"iter_{i}.pth" for i in range(max(1, step - 2), step)]  # max_keep_ckpts=2
    assert open(osp.join(work, "last_checkpoint")).read() == latest
    for name in names:
        assert non_finite_entries(torch.load(osp.join(work, name))) == [], name
    assert [str(w.message) for w in recwarn if "requires_grad" in str(w.message)] == []


def fp16_cfg(data: str, work: str, init_scale: float, lr: float, max_skips: int) -> Config:
    wrapper = dict(
        _delete_=True,
        type="CPUAmpOptimWrapper",
        dtype="float16",
        loss_scale=dict(init_scale=init_scale),
        optimizer=dict(type="SGD", lr=lr, momentum=0.9),
    )
    options = {
        "optim_wrapper": wrapper,
        "train_cfg.max_iters": 12,
        "custom_hooks": [dict(type="NonFiniteLossHook", max_consecutive_skips=max_skips)],
    }
    return fcn_cfg(data, work, options)


def test_fp16_loss_scaler_skips_are_tolerated_up_to_the_option(tmp_path, tiny_data):
    # From 2**24, torch's GradScaler halves its scale on each overflowing fp16 step, skipping
    # it, until the gradients fit: 8 skipped steps (measured; asserted below).
    error, recorder = train(fp16_cfg(tiny_data, str(tmp_path / "a"), 2.0**24, 0.01, 10))
    assert error is None
    scales = [row[1] for row in recorder.rows]
    assert scales[:9] == [2.0 ** (24 - i) for i in range(1, 10)][:8] + [2.0**16]
    weights = [row[2] for row in recorder.rows]
    initial = weights[0]
    assert all(torch.equal(w, initial) for w in weights[:8])  # skipped steps left them alone
    assert not torch.equal(weights[8], initial) and len(weights) == 12

    error, recorder = train(fp16_cfg(tiny_data, str(tmp_path / "b"), 2.0**24, 0.01, 5))
    assert error is not None and error.exit_code == 65
    assert str(error).startswith(
        "non-finite gradients at iteration 6: the loss scaler skipped 6 steps in a row "
        "(max_consecutive_skips=5; loss="
    )


def test_fp16_nan_losses_of_skipped_steps_until_the_scaler_gives_up(tmp_path, tiny_data):
    # lr 1e10: the first (unskipped) update makes weights that overflow fp16 in the forward
    # pass; every later loss is NaN and its step skipped. With BN in train mode the NaN batch
    # statistics reach the running buffers at once: that is divergence of the state.
    error, recorder = train(fp16_cfg(tiny_data, str(tmp_path / "bn"), 2.0**16, 1e10, 3))
    assert str(error).startswith("non-finite parameters or buffers after iteration 2 (loss=nan")
    # BN frozen in the backbone and none in the head: nothing but the skipped steps counts,
    # NaN losses at iterations 2-4 do not stop the run, the 4th skip in a row does.
    cfg = fp16_cfg(tiny_data, str(tmp_path / "no_bn"), 2.0**16, 1e10, 3)
    cfg.model.backbone.norm_eval = True
    cfg.model.decode_head.norm_cfg = None
    error, recorder = train(cfg)
    losses, scales = [row[0] for row in recorder.rows], [row[1] for row in recorder.rows]
    assert losses[0] == pytest.approx(1.1, abs=0.05) and all(x != x for x in losses[1:])
    assert scales == [2.0**16, 2.0**15, 2.0**14, 2.0**13]  # iterations 2-4 skipped
    assert str(error).startswith(
        "non-finite gradients at iteration 5: the loss scaler skipped 4 steps in a row "
        "(max_consecutive_skips=3; loss=nan"
    )


# ------------------------------------------------------------------------------------------
# Real processes
# ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_train_tool_exits_65_with_one_line(tmp_path, tiny_data):
    work = str(tmp_path / "work")
    options = [*data_options(tiny_data), "optim_wrapper.optimizer.lr=1e8", "max_iters=9"]
    options += ["default_hooks.checkpoint.interval=1"]
    result = run_tool([TRAIN, TINY_FCN, "--work-dir", work, "--cfg-options", *options])
    assert result.returncode == DIVERGED_EXIT_CODE, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    match = re.match(r"error: non-finite loss at iteration (\d+) \(loss=nan", last)
    assert match, last
    step = int(match.group(1))
    assert "Traceback" not in result.stderr and "requires_grad" not in result.stderr
    # checkpoint interval 1: every iteration before the stop was saved, and only finite tensors
    names = sorted(n for n in os.listdir(work) if n.endswith(".pth"))
    assert names == [f"iter_{i}.pth" for i in range(1, step)] and step >= 2, names
    for name in names:
        assert non_finite_entries(torch.load(osp.join(work, name))) == [], name


@pytest.mark.slow
def test_torchrun_both_ranks_stop_when_one_rank_sees_a_non_finite_loss(tmp_path, tiny_data):
    config = tmp_path / "ddp.py"
    config.write_text(
        f"_base_ = [{TINY_FCN!r}]\n"
        "custom_imports = dict(imports=['hamseg', 'tests.robust.fault_hooks'])\n"
        "custom_hooks = [dict(type='PoisonLossHook', at=3, rank=1)]\n"
        "default_hooks = dict(checkpoint=dict(interval=1))\n"
    )
    work = str(tmp_path / "work")
    cmd = ["bash", osp.join(REPO, "tools", "dist_train.sh"), str(config), "2", "--work-dir", work]
    cmd += ["--cfg-options", *data_options(tiny_data), "max_iters=6"]
    path = f"{osp.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"
    proc, lines = start_process(cmd, dict(PATH=path, PORT="29547"))
    code, output = finish(proc, lines, timeout=300)  # no rank waits for the other
    assert code == DIVERGED_EXIT_CODE
    assert "error: non-finite loss at iteration 3 (on another rank)" in output, output[-3000:]
    assert "ChildFailedError" not in output, output[-3000:]  # both ranks agreed: said once
    assert sorted(n for n in os.listdir(work) if n.startswith("iter_")) == [
        "iter_1.pth",
        "iter_2.pth",
    ]
