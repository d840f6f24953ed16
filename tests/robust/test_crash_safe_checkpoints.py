"""Crash safety: checkpoints are written atomically and --resume never picks up a partial file.

The slow tests SIGKILL real tools/train.py processes: once in the middle of a checkpoint write
(made slow on purpose), and three times at random moments; every resume continues from the last
complete checkpoint and the run finishes.
"""

from __future__ import annotations

import os
import os.path as osp
import random
import signal
import time

import mmengine.hooks.checkpoint_hook as hook_module
import mmengine.runner as runner_pkg
import mmengine.runner.checkpoint as ckpt_module
import mmengine.runner.runner as runner_module
import pytest
import torch

from hamseg.engine.checkpoints import (
    atomic_save_checkpoint,
    find_latest_complete_checkpoint,
    is_complete_checkpoint,
)
from tests.conftest import REPO
from tests.robust.helpers import (
    TINY_HAM,
    TRAIN,
    data_options,
    run_tool,
    start_tool,
    wait_for_line,
)

SLOW_TRAIN = osp.join(REPO, "tests", "robust", "slow_checkpoint_train.py")


def _ckpt(path, step: int) -> None:
    torch.save(
        dict(meta=dict(iter=step), state_dict=dict(w=torch.full((5000,), float(step)))), path
    )


def _truncate(path) -> None:
    data = open(path, "rb").read()
    with open(path, "wb") as handle:
        handle.write(data[: len(data) // 2])


def test_every_mmengine_binding_uses_the_atomic_writer():
    for module in (ckpt_module, runner_pkg, runner_module):
        assert module.save_checkpoint is atomic_save_checkpoint
        assert module.find_latest_checkpoint is find_latest_complete_checkpoint


def test_interrupted_save_leaves_the_previous_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "iter_5.pth"
    atomic_save_checkpoint(dict(state_dict=dict(w=torch.ones(3))), str(target))
    assert is_complete_checkpoint(str(target)) and os.listdir(tmp_path) == ["iter_5.pth"]

    def dies_halfway(obj, handle):
        handle.write(b"PK\x03\x04 half a checkpoint")
        raise KeyboardInterrupt  # a signal arriving mid-write

    monkeypatch.setattr(torch, "save", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        atomic_save_checkpoint(dict(state_dict=dict(w=torch.zeros(3))), str(target))
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["iter_5.pth"]  # temp removed, final untouched
    assert torch.load(target)["state_dict"]["w"].tolist() == [1.0, 1.0, 1.0]


def test_pointer_file_is_replaced_atomically(tmp_path):
    pointer = tmp_path / "last_checkpoint"
    with hook_module.open(str(pointer), "w") as handle:  # what CheckpointHook calls
        handle.write("/runs/iter_5.pth")
    assert pointer.read_text() == "/runs/iter_5.pth"
    with pytest.raises(RuntimeError):
        with hook_module.open(str(pointer), "w") as handle:
            handle.write("/runs/iter_1")
            raise RuntimeError("killed while writing")
    assert pointer.read_text() == "/runs/iter_5.pth"
    assert sorted(os.listdir(tmp_path)) == ["last_checkpoint"]
    handle = hook_module.open(str(pointer), "w")  # without a with-block: lands on close()
    handle.write("/runs/iter_6.pth")
    assert pointer.read_text() == "/runs/iter_5.pth"
    handle.close()
    assert pointer.read_text() == "/runs/iter_6.pth"
    other = tmp_path / "notes.txt"
    with hook_module.open(str(other), "w") as handle:  # any other file: the builtin open
        assert type(handle).__name__ == "TextIOWrapper"


def test_resume_lookup_skips_incomplete_and_stale(tmp_path):
    work = str(tmp_path)
    assert find_latest_complete_checkpoint(work) is None
    for step in (5, 10, 15):
        _ckpt(tmp_path / f"iter_{step}.pth", step)
    pointer = tmp_path / "last_checkpoint"
    pointer.write_text(str(tmp_path / "iter_15.pth"))
    assert find_latest_complete_checkpoint(work) == str(tmp_path / "iter_15.pth")

    _truncate(tmp_path / "iter_15.pth")  # e.g. written by plain mmengine, then killed
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
    options = [*data_options(root), f"train_cfg.max_iters={max_iters}", *extra]
    return ["--work-dir", work, "--cfg-options", *options]


@pytest.mark.slow
def test_sigkill_during_checkpoint_write_resumes_from_last_complete(tmp_path, tiny_data):
    work = str(tmp_path / "work")
    args = [SLOW_TRAIN, TINY_HAM, *_train_args(work, tiny_data, 15)]
    proc, lines = start_tool(args, {"HAMSEG_SLOW_SAVE": ".iter_10.pth.tmp"})
    wait_for_line(lines, "WRITING", proc)
    time.sleep(1.0)  # a few chunks of iter_10 are on disk
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL

    temp = osp.join(work, ".iter_10.pth.tmp")
    assert osp.getsize(temp) < osp.getsize(osp.join(work, "iter_5.pth"))  # killed mid-write
    assert not osp.exists(osp.join(work, "iter_10.pth"))  # no partial file under the real name
    pointer = open(osp.join(work, "last_checkpoint")).read().strip()
    assert pointer == osp.join(work, "iter_5.pth") and is_complete_checkpoint(pointer)

    result = run_tool([TRAIN, TINY_HAM, *_train_args(work, tiny_data, 15), "--resume"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Auto resumed from the latest checkpoint {osp.join(work, 'iter_5.pth')}" in (
        result.stdout + result.stderr
    )
    final = torch.load(osp.join(work, "iter_15.pth"))
    assert final["meta"]["iter"] == 15
    assert not osp.exists(temp)


@pytest.mark.slow
def test_random_sigkills_then_resume_finish_the_run(tmp_path, tiny_data):
    """Kill at a random iteration plus a random fraction of a second (saves included)."""
    work = str(tmp_path / "work")
    rng = random.Random(0)
    max_iters = 40
    options = ["default_hooks.checkpoint.interval=1", "default_hooks.logger.interval=1"]
    train = [TRAIN, TINY_HAM, *_train_args(work, tiny_data, max_iters, *options)]
    resumed_from: list[int] = []
    reached = 0
    for _ in range(3):
        proc, lines = start_tool([*train, "--resume"], {})
        target = reached + rng.randint(2, 8)
        wait_for_line(lines, rf"Iter\(train\) \[\s*{target}/{max_iters}\]", proc)
        time.sleep(rng.uniform(0.0, 0.15))  # somewhere inside the next iteration or save
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
        names = [n for n in os.listdir(work) if n.endswith(".pth")]
        # whatever moment the kill hit, no checkpoint under a real name is incomplete
        assert all(is_complete_checkpoint(osp.join(work, n)) for n in names), names
        latest = find_latest_complete_checkpoint(work)
        assert latest is not None
        reached = torch.load(latest)["meta"]["iter"]
        # iteration `target` was logged; its checkpoint is written right after the log line
        assert reached >= target - 1
        resumed_from.append(reached)

    result = run_tool([*train, "--resume"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Auto resumed from the latest checkpoint {osp.join(work, f'iter_{reached}.pth')}" in (
        result.stdout + result.stderr
    )
    assert torch.load(osp.join(work, f"iter_{max_iters}.pth"))["meta"]["iter"] == max_iters
    assert resumed_from == sorted(resumed_from)  # progress is never lost
