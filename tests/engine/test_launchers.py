"""Every launcher delivers SIGUSR1, SIGTERM and SIGINT to every rank (issue 37): 2 CPU ranks on
gloo under tools/dist_train.sh, tools/slurm_train.sh around a stand-in srun, plain torchrun and
mim train's ``torch.distributed.launch``; the ranks stop after the same iteration with one
checkpoint, exit 75, and no process of the run is left afterwards. Real subprocesses, each
bounded by a timeout."""

from __future__ import annotations

import os
import os.path as osp
import re
import signal
import sys
import time

import pytest
import torch

from hamseg.compat.checkpoint import is_complete_checkpoint
from tests.conftest import REPO, TINY_FCN
from tests.engine.test_preemption import (
    assert_same_training_state,
    free_port,
    torchrun,
    write_config,
)
from tests.robust.helpers import TINY_HAM, data_options, finish, start_process, wait_for_line

#: Both ranks' workers draw random flips: an exact resume must restart them where they were.
WORKERS = (
    "randomness = dict(seed=7, diff_rank_seed=True, deterministic=True)",
    "train_dataloader = dict(num_workers=1, persistent_workers=True, dataset=dict(pipeline=["
    "dict(type='LoadImageFromFile'), dict(type='LoadAnnotations'),"
    " dict(type='RandomFlip', prob=0.5), dict(type='Resize', scale=(32, 32), keep_ratio=False),"
    " dict(type='PackSegInputs')]))",
)


def processes_of(work: str) -> list[int]:
    """Pids of the processes whose command line names ``work`` (launchers, ranks, workers)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if work.encode() in handle.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def assert_nothing_left(work: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while processes_of(work) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_of(work) == []


def assert_stopped_at(work: str, step: int) -> None:
    """One checkpoint, of iteration ``step``, complete and named by the pointer."""
    assert sorted(n for n in os.listdir(work) if n.endswith((".pth", ".tmp"))) == [
        f"iter_{step}.pth"
    ]
    path = osp.join(work, f"iter_{step}.pth")
    assert open(osp.join(work, "last_checkpoint")).read() == path
    assert is_complete_checkpoint(path) and torch.load(path)["meta"]["iter"] == step


@pytest.mark.slow
def test_sigusr1_to_dist_train_sh_stops_both_ranks_and_resume_is_exact(tmp_path, tiny_data):
    """What ``srun bash tools/dist_train.sh`` under ``#SBATCH --signal=USR1@180`` does: SIGUSR1
    to the script's process group (before: bash and torchrun died at once, the ranks trained
    on)."""
    reference = write_config(tmp_path / "reference.py", TINY_HAM, *WORKERS)
    hook = "custom_hooks = [dict(type='SignalAtIterHook', at=3, mode='wait')]"
    config = write_config(tmp_path / "usr1.py", TINY_HAM, *WORKERS, hook)
    ref_work, work = str(tmp_path / "reference"), str(tmp_path / "usr1")
    proc, lines = torchrun(config, work, tiny_data, free_port(), max_iters=7, new_session=True)
    wait_for_line(lines, r"SIGNAL ME \d+", proc)
    os.killpg(proc.pid, signal.SIGUSR1)
    code, output = finish(proc, lines, timeout=300)
    assert code == 75, output[-3000:]
    assert "training stopped by SIGUSR1 after iteration 3" in output
    assert "ChildFailedError" not in output  # torchrun passed it on: not a failure report
    assert_stopped_at(work, 3)
    assert_nothing_left(work)
    # the stop line's command, run as printed (bash tools/dist_train.sh ... --resume)
    (command,) = re.findall(r"continue with: (.*)$", output, re.M)
    assert command.endswith(" --resume") and f"--work-dir {work}" in command
    path = f"{osp.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"
    proc, lines = start_process(["bash", "-c", command], dict(PATH=path, PORT=str(free_port())))
    code, output = finish(proc, lines)
    assert code == 0, output[-3000:]
    assert "resuming at iteration 3: 3 trained batches skipped at the sampler" in output
    code, output = finish(*torchrun(reference, ref_work, tiny_data, free_port(), max_iters=7))
    assert code == 0, output[-3000:]
    assert_same_training_state(osp.join(work, "iter_7.pth"), osp.join(ref_work, "iter_7.pth"))


@pytest.mark.slow
def test_a_checkpoint_slower_than_torchruns_30_s_completes_under_dist_train_sh(tmp_path, tiny_data):
    config = write_config(
        tmp_path / "slow.py",
        TINY_FCN,
        "custom_hooks = [dict(type='SignalAtIterHook', at=2, mode='wait', sig='SIGTERM'),"
        " dict(type='SlowSaveHook', seconds=40)]",
    )
    work = str(tmp_path / "work")
    proc, lines = torchrun(config, work, tiny_data, free_port(), max_iters=5, new_session=True)
    wait_for_line(lines, r"SIGNAL ME \d+", proc)
    os.killpg(proc.pid, signal.SIGTERM)
    code, output = finish(proc, lines, timeout=400)
    assert code == 75, output[-3000:]
    assert "SLOW SAVE 40 s" in output and "forcefully exiting" not in output
    assert_stopped_at(work, 2)
    assert_nothing_left(work)


def fake_srun(tmp_path) -> dict:
    """``srun`` on PATH is tests/tools/fake_srun.py; the environment to run the scripts in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "srun"
    fake = osp.join(REPO, "tests", "tools", "fake_srun.py")
    script.write_text(f'#!/usr/bin/env bash\nexec {sys.executable} {fake} "$@"\n')
    script.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{osp.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"
    pids = str(tmp_path / "task_pids")
    return dict(PATH=path, FAKE_SRUN_PIDS=pids, GPUS="2", GPUS_PER_NODE="2")


def slurm_train(tmp_path, config: str, work: str, data: str, *extra: str):
    """tools/slurm_train.sh with 2 tasks around tests/tools/fake_srun.py, leading its own
    process group."""
    env = dict(fake_srun(tmp_path), MASTER_PORT=str(free_port()))
    cmd = ["bash", osp.join(REPO, "tools", "slurm_train.sh"), "part", "job", config]
    cmd += ["--work-dir", work, *extra, "--cfg-options", *data_options(data), "max_iters=5"]
    return start_process(cmd, env, new_session=True)


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGUSR1", "SIGTERM"])
def test_a_signal_to_slurm_train_sh_reaches_every_task_once(tmp_path, tiny_data, sig):
    """srun passes SIGUSR1 on, but would SIGKILL the tasks on SIGTERM: the script sends it
    SIGINT instead (``--disable-status``: passed on at once). The SIGUSR1 run then resumes
    to the weights of an uninterrupted one."""
    hook = "custom_hooks = [dict(type='SignalAtIterHook', at=2, mode='wait', rank=1)]"
    config = write_config(tmp_path / "slurm.py", TINY_HAM, *WORKERS, hook)
    work = str(tmp_path / "work")
    proc, lines = slurm_train(tmp_path, config, work, tiny_data)
    wait_for_line(lines, r"SIGNAL ME \d+", proc)
    os.killpg(proc.pid, signal.Signals[sig])
    code, output = finish(proc, lines, timeout=300)
    assert code == 75, output[-3000:]
    stopped_by = "SIGUSR1" if sig == "SIGUSR1" else "SIGINT"
    assert f"training stopped by {stopped_by} after iteration 2" in output
    assert "forcing job termination" not in output
    assert_stopped_at(work, 2)
    task_pids = [int(p) for p in open(tmp_path / "task_pids").read().split()]
    assert len(task_pids) == 2 and not any(osp.exists(f"/proc/{p}") for p in task_pids)
    assert_nothing_left(work)
    if sig == "SIGTERM":
        return
    code, output = finish(*slurm_train(tmp_path, config, work, tiny_data, "--resume"))
    assert code == 0 and "2 trained batches skipped at the sampler" in output, output[-3000:]
    reference = write_config(tmp_path / "reference.py", TINY_HAM, *WORKERS)
    ref_work = str(tmp_path / "reference")
    assert finish(*slurm_train(tmp_path, reference, ref_work, tiny_data))[0] == 0
    assert_same_training_state(osp.join(work, "iter_5.pth"), osp.join(ref_work, "iter_5.pth"))


LAUNCH = {
    "torchrun": ["-m", "torch.distributed.run", "--nproc_per_node=2"],
    # what `mim train hamseg CONFIG --launcher pytorch --gpus 2` runs (openmim 0.3.9), from a
    # parent that waits with subprocess.check_call as mim does
    "mim": ["-m", "torch.distributed.launch", "--nproc_per_node=2"],
}


@pytest.mark.slow
@pytest.mark.parametrize("launch", ["torchrun", "mim"])
def test_plain_torchrun_dying_of_sigusr1_still_stops_its_ranks(tmp_path, tiny_data, launch):
    """torchrun's defaults do not handle SIGUSR1, which ends it at once (its ranks, in their own
    sessions, were orphaned and trained on): each rank now gets SIGTERM when it dies."""
    config = write_config(
        tmp_path / "plain.py",
        TINY_FCN,
        "custom_hooks = [dict(type='SignalAtIterHook', at=2, mode='wait', sig='SIGTERM')]",
    )
    work = str(tmp_path / "work")
    port = f"--master_port={free_port()}"
    train = [osp.join(REPO, "tools", "train.py"), config, "--launcher", "pytorch"]
    train += ["--work-dir", work, "--cfg-options", *data_options(tiny_data), "max_iters=5"]
    launcher = [sys.executable, *LAUNCH[launch], port, *train]
    if launch == "mim":
        launcher = [sys.executable, "-c", f"import subprocess; subprocess.check_call({launcher})"]
    proc, lines = start_process(launcher, new_session=True)
    wait_for_line(lines, "torchrun dies of SIGUSR1", proc)  # warned
    wait_for_line(lines, r"SIGNAL ME \d+", proc)
    os.killpg(proc.pid, signal.SIGUSR1)  # torchrun (and mim) die of it
    assert_nothing_left(work, timeout=240)  # the ranks stop by themselves
    code, output = finish(proc, lines, timeout=60)
    assert code != 0
    assert len(re.findall(r"training stopped by SIGTERM after iteration 2", output)) == 1
    assert_stopped_at(work, 2)
