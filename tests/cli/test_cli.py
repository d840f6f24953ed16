"""What every tool shares (hamseg.cli.common): config names and launchers as mmseg's tools read
them, one line and exit 2 for a user's error, the guard hooks, hamseg's notices."""

import os
import os.path as osp

import mmseg
import pytest
import torch
from mmengine.config import Config

from hamseg.cli import add_guard_hooks, build_config, run_cli
from hamseg.cli.common import log_notices, notice
from hamseg.cli.preflight import naming_validate_dataset
from hamseg.compat.package_lookup import PACKAGE_DIR
from hamseg.datasets.checks import InvalidSampleError
from hamseg.engine import RandomStateHook
from tests.conftest import TINY_FCN
from tests.helpers import TEST, TRAIN, run_tool_here

DEMO = "demo/hamhead-nmf_r18-d8_context-shapes.py"
SLURM = "error: --launcher slurm: SLURM_PROCID, SLURM_NTASKS, SLURM_NODELIST not set; start"
MPI = "error: --launcher mpi: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL"
NOT_FOUND = "error: config file not found: {} (hamseg::DIR/FILE.py, mmseg::DIR/FILE.py: a file"
MMSEG_CONFIGS = osp.join(osp.dirname(mmseg.__file__), ".mim", "configs")
HAMSEG_CONFIGS = osp.join(PACKAGE_DIR, ".mim", "configs")


@pytest.mark.parametrize(
    "tool,args,expected",
    [
        (TRAIN, ["configs/nope.py"], "error: config file not found: configs/nope.py"),
        (TEST, ["configs/nope.py", TINY_FCN], "error: config file not found: configs/nope.py"),
        (TEST, [TINY_FCN, "missing.pth"], "error: checkpoint file not found: missing.pth"),
        (TRAIN, ["hamseg::nope.py"], NOT_FOUND.format("hamseg::nope.py")),
        (TRAIN, ["mmseg::fcn/nope.py"], NOT_FOUND.format("mmseg::fcn/nope.py")),
        (TRAIN, ["mmseg::nope.py"], NOT_FOUND.format("mmseg::nope.py")),
        (TRAIN, ["nopkg::a/b.py"], NOT_FOUND.format("nopkg::a/b.py")),
        (TRAIN, [TINY_FCN, "--launcher", "mpi"], MPI),
        (TRAIN, [TINY_FCN, "--launcher", "slurm"], SLURM),
        (TEST, [TINY_FCN, TINY_FCN, "--launcher", "slurm"], SLURM),
    ],
)
def test_a_users_error_is_one_line_and_exit_2(tool, args, expected, monkeypatch, capsys):
    for name in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "MASTER_ADDR"):
        monkeypatch.delenv(name, raising=False)
    code, _, err = run_tool_here(tool, args, monkeypatch, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert expected in err and "Traceback" not in err
    if "--launcher" in args:
        assert ("mpirun" if "mpi" in args else "srun") in err


def test_local_rank_sets_local_rank_only_when_the_launcher_did_not(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    build_config(TINY_FCN, local_rank=3)
    assert os.environ["LOCAL_RANK"] == "3"  # torch.distributed.launch passes --local-rank only
    monkeypatch.setenv("LOCAL_RANK", "1")
    build_config(TINY_FCN, local_rank=3)
    assert os.environ["LOCAL_RANK"] == "1"  # torchrun's variable wins, as in mmseg


def test_packaged_config_names_load_the_installed_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no checkout's configs/ in reach
    cfg = build_config(f"hamseg::{DEMO}")
    assert (
        cfg.filename == osp.join(HAMSEG_CONFIGS, DEMO) and cfg.model.decode_head.type == "HamHead"
    )
    assert cfg.work_dir == "./work_dirs/hamhead-nmf_r18-d8_context-shapes"
    fcn = "fcn/fcn_r18-d8_4xb2-80k_cityscapes-512x1024.py"
    cfg = build_config(f"mmseg::{fcn}", work_dir="w")
    assert cfg.filename == osp.join(MMSEG_CONFIGS, fcn) and cfg.model.backbone.depth == 18


class _BadSample(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int):
        raise InvalidSampleError(f"label file 'masks/{i:03d}_mask.png': values 7 outside\n  [0, 3)")


def test_an_error_in_a_dataloader_worker_is_its_own_line_naming_the_validate_command():
    loader = torch.utils.data.DataLoader(_BadSample(), num_workers=1)
    with pytest.raises(InvalidSampleError) as info:
        with naming_validate_dataset("c.py"):
            next(iter(loader))
    assert str(info.value) == (
        "label file 'masks/000_mask.png': values 7 outside [0, 3); list every bad file at once: "
        "python tools/validate_dataset.py c.py"
    )


def test_guards_are_added_unless_the_config_has_them():
    cfg = Config(dict(custom_hooks=[dict(type="PreemptionHook", requeue=False)]))
    assert add_guard_hooks(cfg) == ["mmseg.NonFiniteLossHook", "mmseg.RandomStateHook"]
    assert cfg.custom_hooks[0] == dict(type="PreemptionHook", requeue=False)  # its options win
    cfg = Config(dict(custom_hooks=[dict(type="mmseg.NonFiniteLossHook"), RandomStateHook()]))
    assert add_guard_hooks(cfg) == ["mmseg.PreemptionHook"] and add_guard_hooks(cfg) == []
    cfg = Config.fromfile(TINY_FCN)
    assert add_guard_hooks(cfg)[-3:] == [
        "mmseg.AtomicCheckpointHook",
        "mmseg.ResumableInfiniteSampler",
        "collate_with_worker_rng",
    ]
    checkpoint = cfg.default_hooks.checkpoint  # made atomic, its options kept
    assert checkpoint == dict(type="mmseg.AtomicCheckpointHook", by_epoch=False, interval=5)


def test_notices_are_repeated_as_one_block(monkeypatch):
    logged: list[str] = []
    monkeypatch.setattr("hamseg.cli.common.print_log", lambda message, *_: logged.append(message))
    notice("first")
    notice("second")
    log_notices()
    log_notices()  # once
    assert logged[:2] == ["first", "second"] and len(logged) == 3
    assert logged[2].endswith("\n    hamseg: first\n    hamseg: second")


def test_an_aborting_ctrl_c_is_one_line_and_exit_130(capsys):
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as exit_:
        run_cli(interrupted)
    assert exit_.value.code == 130
    assert capsys.readouterr().err.count("\n") == 1
