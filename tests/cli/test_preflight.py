"""What tools/train.py checks before iteration 1 (hamseg.cli.preflight): every sample of the splits
the run reads, and the total batch the recipe is for."""

import os
import os.path as osp
import shlex
import socket

import pytest
from mmengine.config import Config

from hamseg.cli import CLIError
from hamseg.cli.preflight import check_total_batch, launch_world_size, validate_command
from tests.conftest import REPO, TINY_FCN, write_tiny_dataset
from tests.helpers import TRAIN, data_options, run_tool

RECIPES = ["ham_voc.py", "ham_voc_trainval.py", "ham_context.py", "ham_context_60.py"]


def recipe(name: str = "ham_voc.py") -> Config:
    return Config.fromfile(osp.join(REPO, "configs", name))


@pytest.mark.parametrize("name", RECIPES)
def test_every_recipe_records_its_total_batch_of_16(name):
    cfg = recipe(name)
    assert cfg.auto_scale_lr == dict(enable=False, base_batch_size=16)
    check_total_batch(cfg, 8)  # 8 GPUs x 2, the recipe as written
    cfg.train_dataloader.batch_size = 4
    check_total_batch(cfg, 4)


def test_another_total_is_refused_naming_the_fixes_unless_scaled_or_rebased():
    cfg = recipe()
    with pytest.raises(CLIError) as info:
        check_total_batch(cfg, 2)
    message = str(info.value)
    assert message.startswith("ham_voc.py: total batch 2 process(es) x 2 = 4, but the recipe is")
    for fix in ("total batch of 16", "--auto-scale-lr (lr x 4/16)", "base_batch_size=4"):
        assert fix in message, fix
    cfg.auto_scale_lr.base_batch_size = 4  # "I mean this batch": the recipe's lr at batch 4
    check_total_batch(cfg, 2)
    assert cfg.auto_scale_lr.enable is False
    cfg = recipe()
    check_total_batch(cfg, 2, scale=True)
    assert cfg.auto_scale_lr == dict(enable=True, base_batch_size=16)  # mmengine: lr x 8 / 16
    demo = Config.fromfile(
        osp.join(REPO, "configs", "demo", "hamhead-nmf_r18-d8_context-shapes.py")
    )
    check_total_batch(demo, 3)  # no base batch: not checked, cannot be scaled
    with pytest.raises(CLIError, match="--auto-scale-lr: the config has no auto_scale_lr"):
        check_total_batch(demo, 3, scale=True)


def test_world_size_from_the_launchers_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("SLURM_NTASKS", "5")
    assert [launch_world_size(x) for x in ("none", "pytorch", "mpi", "slurm")] == [1, 3, 3, 5]


def test_the_suggested_validate_command_repeats_the_users_cfg_options():
    argv = ["c.py", "--work-dir", "w", "--cfg-options", "data_root=/my data", "a.b=1", "--resume"]
    assert validate_command("my c.py", [*argv, "--cfg-options=img_dir=x"]) == (
        "python tools/validate_dataset.py 'my c.py' --cfg-options 'data_root=/my data' a.b=1 "
        "img_dir=x"
    )
    assert validate_command("c.py", ["c.py", "--amp"]) == "python tools/validate_dataset.py c.py"


def test_bad_data_stops_before_iteration_1_naming_the_validate_command(tmp_path):
    root = write_tiny_dataset(str(tmp_path / "data"))
    bad_val = osp.join(root, "img_dir", "val", "001.jpg")
    with open(bad_val, "wb") as handle:
        handle.write(b"\xff\xd8 truncated jpeg")
    work = str(tmp_path / "work")
    args = [TRAIN, TINY_FCN, "--work-dir", work, "--cfg-options", *data_options(root)]
    result = run_tool([*args, "max_iters=2"])
    assert result.returncode == 2, result.stderr[-2000:]
    assert not osp.exists(osp.join(work, "iter_1.pth"))
    assert bad_val in result.stderr.splitlines()[-2]  # every problem listed, then one line
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: 1 bad sample(s) before the first iteration, listed above")
    again = shlex.join(["python", "tools/validate_dataset.py", TINY_FCN, *args[4:], "max_iters=2"])
    assert last.endswith(f"check again with `{again}`"), last


def two_ranks(tmp_path, data_root: str, *extra: str) -> list:
    """tools/train.py as 2 CPU ranks (torchrun's environment for each), tiny_fcn.py with a
    recipe's base batch of 16 and batch 2 per rank."""
    import subprocess
    import sys

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
        env.update(WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1")
        env["MASTER_PORT"] = str(port)
        procs.append(subprocess.Popen(cmd, env=env, cwd=tmp_path, text=True, stdout=-1, stderr=-1))
    return [(p.wait(600), *p.communicate()) for p in procs]


@pytest.mark.slow
def test_two_ranks_at_batch_2_are_refused_in_one_line_and_scaled_on_request(tmp_path, tiny_data):
    for code, _, err in two_ranks(tmp_path, tiny_data):
        assert code == 2, err[-3000:]
        (line,) = err.strip().splitlines()
        assert line.startswith("error: tiny_fcn.py: total batch 2 process(es) x 2 = 4, but the")
    (code0, out, err), (code1, _, err1) = two_ranks(tmp_path, tiny_data, "--auto-scale-lr")
    assert code0 == code1 == 0, err1[-3000:]
    assert "lr scaled by 4/16 (auto_scale_lr)" in out + err
    assert "Iter(train) [1/1]  lr: 2.5000e-03" in out + err  # tiny_fcn.py's 0.01 x 4/16
