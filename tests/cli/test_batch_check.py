"""The total-batch check at launch (hamseg.cli.batch_check, tools/train.py): the recipes record
the batch their lr is for, another total stops in one line unless accepted or scaled."""

from __future__ import annotations

import os
import os.path as osp
import socket
import subprocess
import sys

import pytest
from mmengine.config import Config

from hamseg.cli import CLIError
from hamseg.cli.batch_check import check_total_batch, launch_world_size
from tests.conftest import REPO, TINY_FCN

TRAIN = osp.join(REPO, "tools", "train.py")
RECIPES = ["ham_voc.py", "ham_voc_trainval.py", "ham_context.py", "ham_context_60.py"]


def recipe(name: str = "ham_voc.py") -> Config:
    return Config.fromfile(osp.join(REPO, "configs", name))


@pytest.mark.parametrize("name", RECIPES)
def test_every_recipe_records_its_total_batch_of_16(name):
    cfg = recipe(name)
    assert cfg.auto_scale_lr == dict(enable=False, base_batch_size=16)
    check_total_batch(cfg, 8)  # 8 GPUs x 2, the recipe as written
    cfg.train_dataloader.batch_size = 4
    check_total_batch(cfg, 4)  # 4 GPUs x 4


def test_another_total_is_refused_with_the_fixes():
    cfg = recipe()
    with pytest.raises(CLIError) as info:
        check_total_batch(cfg, 2)
    message = str(info.value)
    assert "\n" not in message and message.startswith("ham_voc.py: total batch")
    assert (
        "2 process(es) x 2 = 4" in message and "for 16 (auto_scale_lr.base_batch_size)" in message
    )
    for fix in (
        "8 GPUs",
        "train_dataloader.batch_size=8",
        "--auto-scale-lr",
        "--allow-batch-mismatch",
    ):
        assert fix in message, fix
    cfg.train_dataloader.batch_size = 4  # 3 x 4 = 12: no batch per GPU makes 16 on 3 GPUs
    with pytest.raises(
        CLIError, match=r"= 12, but .*: use 4 GPUs, or --auto-scale-lr \(lr x 12/16\)"
    ):
        check_total_batch(cfg, 3)


def test_accepting_or_scaling_lets_it_run():
    cfg = recipe()
    check_total_batch(cfg, 2, accept=True)
    assert cfg.auto_scale_lr.enable is False  # the recipe's lr at batch 4
    check_total_batch(cfg, 2, scale=True)
    assert cfg.auto_scale_lr == dict(enable=True, base_batch_size=16)  # mmengine: lr x 4 / 16


def test_configs_without_a_base_batch_are_not_checked_but_cannot_scale():
    cfg = Config.fromfile(osp.join(REPO, "configs", "demo", "hamhead-nmf_r18-d8_context-shapes.py"))
    assert "auto_scale_lr" not in cfg
    check_total_batch(cfg, 3)
    with pytest.raises(
        CLIError, match="--auto-scale-lr: the config has no auto_scale_lr.base_batch_size"
    ):
        check_total_batch(cfg, 3, scale=True)


def test_world_size_from_the_launchers_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("SLURM_NTASKS", "5")
    assert (launch_world_size("none"), launch_world_size("pytorch")) == (1, 3)
    assert (launch_world_size("mpi"), launch_world_size("slurm")) == (3, 5)


def two_ranks(tmp_path, data_root: str, *extra: str) -> list[subprocess.CompletedProcess]:
    """tools/train.py as 2 CPU ranks (the environment torchrun gives each), on tiny_fcn.py with
    a recipe's base batch of 16 and batch 2 per rank."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cmd = [sys.executable, TRAIN, TINY_FCN, "--launcher", "pytorch", *extra]
    cmd += ["--work-dir", str(tmp_path / "work"), "--skip-data-check", "--cfg-options"]
    cmd += [f"data_root={data_root}", "auto_scale_lr.base_batch_size=16", "max_iters=1"]
    cmd += ["default_hooks.logger.interval=1"]
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=REPO, RANK=str(rank))
        env.update(
            WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
        )
        procs.append(
            subprocess.Popen(
                cmd,
                env=env,
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        results.append(subprocess.CompletedProcess(cmd, proc.returncode, out, err))
    return results


@pytest.mark.slow
def test_two_ranks_at_batch_2_are_refused_in_one_line_and_accepted_on_request(tmp_path, tiny_data):
    for result in two_ranks(tmp_path, tiny_data):
        assert result.returncode == 2, result.stderr[-3000:]
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("error: tiny_fcn.py: total batch 2 process(es) x 2 = 4, but the")
    rank0, rank1 = two_ranks(tmp_path, tiny_data, "--allow-batch-mismatch")
    assert rank0.returncode == rank1.returncode == 0, rank1.stderr[-3000:]
    log = rank0.stdout + rank0.stderr  # mmengine's logger writes INFO lines on rank 0
    assert "recipe 16: trained with the recipe's lr (--allow-batch-mismatch)" in log
    assert "Iter(train) [1/1]  lr: 1.0000e-02" in log  # tiny_fcn.py's lr, not rescaled
    rank0, rank1 = two_ranks(tmp_path, tiny_data, "--auto-scale-lr")
    assert rank0.returncode == rank1.returncode == 0, rank1.stderr[-3000:]
    log = rank0.stdout + rank0.stderr
    assert "lr scaled by 4/16 (auto_scale_lr)" in log
    assert "Scaling the original LR by 0.25" in log  # mmengine's Runner.scale_lr
    assert "Iter(train) [1/1]  lr: 2.5000e-03" in log
