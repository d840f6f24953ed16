"""Crash safety: checkpoints are written atomically, and --resume never picks up a partial file
(whatever the ``last_checkpoint`` pointer says).

A write that dies half-way (an exception in ``write``, as a kill would leave it) is injected at
the ``open`` of the target file. The slow tests SIGKILL real tools/train.py processes: once in
the middle of a checkpoint write, and three times at random moments.
"""

from __future__ import annotations

import builtins
import os
import os.path as osp
import signal

import pytest
import torch
from mmengine.hooks import Hook
from mmengine.runner import save_checkpoint

from hamseg.cli import add_guard_hooks
from hamseg.compat.checkpoint import is_complete_checkpoint
from hamseg.engine.checkpoints import ATOMIC_BACKEND, find_latest_complete_checkpoint
from tests.conftest import REPO
from tests.robust.helpers import (
    TINY_HAM,
    TRAIN,
    build_runner,
    data_options,
    run_tool,
    start_tool,
    tiny_cfg,
    wait_for_line,
)

SLOW_TRAIN = osp.join(REPO, "tests", "robust", "slow_checkpoint_train.py")


class Killed(BaseException):
    """A kill arriving in the middle of a write."""


@pytest.fixture
def die_writing(monkeypatch):
    """``die_writing(part)``: the next writes of a file whose path contains ``part`` stop after
    half of the data with :class:`Killed`."""
    real_open = builtins.open

    class HalfWriter:
        def __init__(self, handle) -> None:
            self.handle = handle

        def write(self, data):
            self.handle.write(data[: len(data) // 2])
            self.handle.flush()
            raise Killed

        def __getattr__(self, name):
            return getattr(self.handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self.handle.close()

    def arm(part: str) -> None:
        def dying_open(file, mode="r", *args, **kwargs):
            handle = real_open(file, mode, *args, **kwargs)
            hit = "w" in mode and isinstance(file, str) and part in file
            return HalfWriter(handle) if hit else handle

        monkeypatch.setattr(builtins, "open", dying_open)

    return arm


def _ckpt(path, step: int) -> None:
    torch.save(
        dict(meta=dict(iter=step), state_dict=dict(w=torch.full((5000,), float(step)))), path
    )


@pytest.mark.parametrize("backend", [None, ATOMIC_BACKEND])
def test_a_write_killed_half_way_keeps_the_previous_file(tmp_path, die_writing, backend):
    target = str(tmp_path / "iter_5.pth")
    save_checkpoint(dict(state_dict=dict(w=torch.ones(3))), target)
    die_writing("iter_5.pth")
    with pytest.raises(Killed):
        backend_args = dict(backend=backend) if backend else None
        save_checkpoint(dict(state_dict=dict(w=torch.zeros(3))), target, backend_args=backend_args)
    if backend is None:  # mmengine's local backend: a truncated file under the real name
        assert not is_complete_checkpoint(target)
        return
    assert os.listdir(tmp_path) == ["iter_5.pth"]  # temporary file removed
    assert torch.load(target)["state_dict"]["w"].tolist() == [1.0, 1.0, 1.0]


class ArmAfterFirstIteration(Hook):
    priority = "LOWEST"

    def __init__(self, arm) -> None:
        self.arm = arm

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if runner.iter == 0:
            self.arm()


@pytest.mark.parametrize("dies", ["iter_2.pth", "last_checkpoint"])
def test_train_tools_checkpoint_hook_writes_atomically(tmp_path, tiny_data, die_writing, dies):
    work = str(tmp_path / "work")
    options = {"train_cfg.max_iters": 3, "default_hooks.checkpoint.interval": 1}
    cfg = tiny_cfg(tiny_data, work, {**options, "default_hooks.checkpoint.max_keep_ckpts": 2})
    assert "mmseg.AtomicCheckpointHook" in add_guard_hooks(cfg)  # what tools/train.py does
    assert cfg.default_hooks.checkpoint.max_keep_ckpts == 2  # the config's options are kept
    cfg.custom_hooks = []  # no signal handlers left behind by a run that never finishes
    runner = build_runner(cfg)
    runner.register_hook(ArmAfterFirstIteration(lambda: die_writing(dies)))
    with pytest.raises(Killed):
        runner.train()
    names = sorted(os.listdir(work))
    first = osp.join(work, "iter_1.pth")
    assert is_complete_checkpoint(first) and not [n for n in names if n.endswith(".tmp")]
    second = osp.join(work, "iter_2.pth")
    if dies == "iter_2.pth":
        assert "iter_2.pth" not in names
        assert open(osp.join(work, "last_checkpoint")).read() == first
    else:  # mmengine writes the pointer in place, torn here: the resume lookup does not trust it
        assert is_complete_checkpoint(second)
    assert find_latest_complete_checkpoint(work) == (first if dies == "iter_2.pth" else second)


def test_resume_lookup_skips_incomplete_and_stale(tmp_path):
    work = str(tmp_path)
    assert find_latest_complete_checkpoint(work) is None
    for step in (5, 10, 15):
        _ckpt(tmp_path / f"iter_{step}.pth", step)
    pointer = tmp_path / "last_checkpoint"
    pointer.write_text(str(tmp_path / "iter_15.pth"))
    assert find_latest_complete_checkpoint(work) == str(tmp_path / "iter_15.pth")

    data = (tmp_path / "iter_15.pth").read_bytes()  # e.g. written by plain mmengine, then killed
    (tmp_path / "iter_15.pth").write_bytes(data[: len(data) // 2])
    assert not is_complete_checkpoint(str(tmp_path / "iter_15.pth"))
    assert find_latest_complete_checkpoint(work) == str(tmp_path / "iter_10.pth")
    pointer.write_text("")  # pointer emptied by a kill
    assert find_latest_complete_checkpoint(work) == str(tmp_path / "iter_10.pth")
    pointer.write_text(str(tmp_path / "iter_99.pth"))  # names a file that is gone
    assert find_latest_complete_checkpoint(work) == str(tmp_path / "iter_10.pth")
    pointer.unlink()
    (tmp_path / ".iter_20.pth.tmp").write_bytes(b"partial")
    assert find_latest_complete_checkpoint(work) == str(tmp_path / "iter_10.pth")
    assert not (tmp_path / ".iter_20.pth.tmp").exists()  # left-over temp cleaned up


# ------------------------------------------------------------------------------------------
# Real processes, really killed
# ------------------------------------------------------------------------------------------
def _train_args(work: str, root: str, max_iters: int, *extra: str) -> list[str]:
    options = [*data_options(root), f"max_iters={max_iters}", *extra]
    return ["--work-dir", work, "--cfg-options", *options]


def _resumed_from(output: str, path: str) -> bool:
    return f"Resuming from the latest complete checkpoint {path}" in output


@pytest.mark.slow
def test_sigkill_during_checkpoint_write_resumes_from_last_complete(tmp_path, tiny_data):
    work = str(tmp_path / "work")
    args = [SLOW_TRAIN, TINY_HAM, *_train_args(work, tiny_data, 15)]
    proc, lines = start_tool(args, {"HAMSEG_SLOW_SAVE": ".iter_10.pth.tmp"})
    wait_for_line(lines, r"WROTE 10/20 .*\.iter_10\.pth\.tmp", proc)  # half of it on disk
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL

    temp = osp.join(work, ".iter_10.pth.tmp")
    assert osp.getsize(temp) < osp.getsize(osp.join(work, "iter_5.pth"))  # killed mid-write
    assert not osp.exists(osp.join(work, "iter_10.pth"))  # no partial file under the real name
    pointer = open(osp.join(work, "last_checkpoint")).read().strip()
    assert pointer == osp.join(work, "iter_5.pth") and is_complete_checkpoint(pointer)

    result = run_tool([TRAIN, TINY_HAM, *_train_args(work, tiny_data, 15), "--resume"])
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert _resumed_from(output, osp.join(work, "iter_5.pth")) and "iter: 5" in output
    assert torch.load(osp.join(work, "iter_15.pth"))["meta"]["iter"] == 15
    assert not osp.exists(temp)
