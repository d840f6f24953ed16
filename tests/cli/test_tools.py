"""tools/train.py and tools/test.py end to end on tiny_fcn.py (CPU): a stopped run resumed by
mmseg's flag, predictions written by every rank, the mpi launcher."""

import os
import os.path as osp
import socket
import subprocess
import sys

import pytest
import torch

from tests.conftest import REPO, TINY_FCN
from tests.helpers import TEST, TRAIN, data_options, run_tool


def train(work: str, root: str, *extra: str, options: tuple = ()) -> str:
    args = [TRAIN, TINY_FCN, "--work-dir", work, *extra, "--cfg-options", *data_options(root)]
    result = run_tool([*args, "max_iters=4", *options])
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


def test_a_stopped_run_resumes_and_tests_with_predictions(tmp_path, tiny_data):
    work = str(tmp_path / "work")
    train(work, tiny_data, options=("train_cfg.max_iters=2", "default_hooks.checkpoint.interval=2"))
    log = train(work, tiny_data, "--resume")
    assert "resumed epoch: 0, iter: 2" in log
    checkpoint = torch.load(osp.join(work, "iter_4.pth"), map_location="cpu")
    assert checkpoint["meta"]["iter"] == 4 and checkpoint["param_schedulers"][0]["last_step"] == 3
    out = str(tmp_path / "pred")
    args = [TEST, TINY_FCN, osp.join(work, "iter_4.pth"), "--work-dir", work, "--out", out]
    result = run_tool([*args, "--cfg-options", *data_options(tiny_data)])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "mIoU" in result.stdout + result.stderr
    assert sorted(os.listdir(out)) == ["000.png", "001.png"]


@pytest.mark.slow
def test_out_is_made_on_every_rank_under_dist_test_sh(tmp_path, tiny_data):
    """mmseg's IoUMetric makes --out on rank 0 only; rank 1 wrote into a missing folder."""
    work = str(tmp_path / "work")
    train(work, tiny_data, options=("train_cfg.max_iters=1", "default_hooks.checkpoint.interval=1"))
    out = str(tmp_path / "deep" / "pred")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    path = f"{osp.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"  # `python` in it
    cmd = ["bash", "tools/dist_test.sh", TINY_FCN, osp.join(work, "iter_1.pth"), "2"]
    cmd += ["--out", out, "--work-dir", work, "--cfg-options", *data_options(tiny_data)]
    env = dict(os.environ, PATH=path, PORT=port, OMP_NUM_THREADS="1", PYTHONPATH=REPO)
    result = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(os.listdir(out)) == ["000.png", "001.png"]


@pytest.mark.slow
def test_mpi_launcher_trains_with_the_variables_mpirun_sets(tmp_path, tiny_data):
    """No OpenMPI here: the variables OpenMPI's mpirun gives every process, set by hand for a
    1-process world; mmengine's mpi launcher reads exactly these."""
    env = dict(OMPI_COMM_WORLD_RANK="0", OMPI_COMM_WORLD_SIZE="1", OMPI_COMM_WORLD_LOCAL_RANK="0")
    work = str(tmp_path / "mpi")
    args = [TRAIN, TINY_FCN, "--work-dir", work, "--launcher", "mpi", "--cfg-options"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(probe.getsockname()[1]))
    result = run_tool([*args, *data_options(tiny_data), "max_iters=2"], env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Distributed launcher: mpi" in result.stdout + result.stderr
    assert torch.load(osp.join(work, "iter_2.pth"))["meta"]["iter"] == 2
