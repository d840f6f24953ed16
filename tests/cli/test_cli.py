"""build_config: packaged config names, launcher handling (--local-rank as in mmseg, --launcher
mpi outside mpirun), --cfg-options data_root; run_cli's one-line errors."""

from __future__ import annotations

import os
import os.path as osp
import subprocess
import sys

import mmseg
import pytest
import torch
from mmengine.config import Config

from hamseg.cli import CLIError, add_guard_hooks, build_config, run_cli
from hamseg.compat.package_lookup import PACKAGE_DIR
from hamseg.engine import ChannelsLastHook, NonFiniteLossHook, PreemptionHook, RandomStateHook
from hamseg.utils.errors import UsageError
from tests.conftest import REPO, TINY_FCN

DEMO = "demo/hamhead-nmf_r18-d8_context-shapes.py"
MMSEG_FCN = "fcn/fcn_r18-d8_4xb2-80k_cityscapes-512x1024.py"


def test_local_rank_argument_sets_local_rank_only_when_the_launcher_did_not(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    build_config(TINY_FCN, local_rank=3)
    assert os.environ["LOCAL_RANK"] == "3"  # torch.distributed.launch passes --local-rank only
    monkeypatch.setenv("LOCAL_RANK", "1")
    build_config(TINY_FCN, local_rank=3)
    assert os.environ["LOCAL_RANK"] == "1"  # torchrun's variable wins, as in mmseg


def test_mpi_launcher_outside_mpirun_says_what_to_install(monkeypatch):
    for name in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "MASTER_ADDR"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(CLIError) as err:
        build_config(TINY_FCN, launcher="mpi")
    message = str(err.value)
    assert message.startswith("--launcher mpi: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,")
    assert "OpenMPI's mpirun" in message and "apt install openmpi-bin" in message


class _BadSample(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int):
        from hamseg.datasets.loading import InvalidSampleError

        raise InvalidSampleError(f"label file 'masks/{i:03d}_mask.png': values 7 outside\n[0, 3)")


def test_an_error_in_a_dataloader_worker_is_its_own_message():
    from hamseg.cli import user_message
    from hamseg.datasets.loading import InvalidSampleError

    loader = torch.utils.data.DataLoader(_BadSample(), num_workers=1)
    with pytest.raises(InvalidSampleError) as info:
        next(iter(loader))
    assert "DataLoader worker process 0" in str(info.value)  # torch's wrapper, with a traceback
    assert user_message(info.value) == "label file 'masks/000_mask.png': values 7 outside [0, 3)"
    assert user_message(ValueError("two\n  lines")) == "two lines"


def test_data_root_override_moves_every_dataset_that_used_the_variable(tmp_path):
    from tests.conftest import REPO

    custom = os.path.join(REPO, "configs", "custom", "hamhead-nmf_r18-d8_custom.py")
    cfg = build_config(custom, {"data_root": "/data/mine"}, work_dir="/tmp/w")
    roots = [cfg[f"{s}_dataloader"].dataset.data_root for s in ("train", "val", "test")]
    assert roots == ["/data/mine"] * 3
    other = tmp_path / "other.py"
    other.write_text(
        'data_root = "a"\ntrain_dataloader = dict(dataset=dict(type="X", data_root="b"))\n'
    )
    with pytest.raises(UsageError, match=r"no dataset of this config uses its data_root variable"):
        build_config(str(other), {"data_root": "/data/mine"}, work_dir="/tmp/w")


def test_packaged_config_names_load_the_installed_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no checkout's configs/ in reach
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    cfg = build_config(f"hamseg::{DEMO}")
    assert cfg.filename == osp.join(PACKAGE_DIR, ".mim", "configs", DEMO)
    assert cfg.model == Config.fromfile(osp.join(REPO, "configs", DEMO)).model
    assert cfg.model.decode_head.type == "HamHead"
    assert cfg.work_dir == "./work_dirs/hamhead-nmf_r18-d8_context-shapes"
    cfg = build_config(f"mmseg::{MMSEG_FCN}", work_dir="w")
    mmseg_configs = osp.join(osp.dirname(mmseg.__file__), ".mim", "configs")
    assert cfg.filename == osp.join(mmseg_configs, MMSEG_FCN)
    assert cfg.model.backbone.depth == 18 and cfg.work_dir == "w"


@pytest.mark.parametrize(
    "name,detail",
    [
        ("hamseg::nope.py", f"no such file in {PACKAGE_DIR}/.mim/configs"),
        ("hamseg::demo/nope.py", f"no such file in {PACKAGE_DIR}/.mim/configs"),
        ("mmseg::fcn/nope.py", "no such file in {mmseg}/.mim/configs"),
        ("mmseg::nope.py", "name a packaged config mmseg::DIR/FILE.py"),
        (
            "nopkg::a/b.py",
            "unknown package 'nopkg': name hamseg::DIR/FILE.py, mmseg::DIR/FILE.py or a file",
        ),
    ],
)
def test_an_unknown_packaged_config_is_refused_with_its_name(name, detail):
    detail = detail.format(mmseg=osp.dirname(mmseg.__file__))
    with pytest.raises(FileNotFoundError) as err:
        build_config(name)
    assert str(err.value) == f"config file not found: {name} ({detail})"


def test_train_tool_refuses_an_unknown_packaged_config_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, osp.join(REPO, "tools", "train.py"), "hamseg::nope.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    folder = osp.join(PACKAGE_DIR, ".mim", "configs")
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: config file not found: hamseg::nope.py (no such file in {folder})"
    )
    assert "Traceback" not in result.stderr and result.stderr.count("error:") == 1


def test_guards_are_added_unless_the_config_has_them():
    cfg = Config(dict(custom_hooks=[dict(type="PreemptionHook", requeue=False)]))
    added = add_guard_hooks(cfg)
    assert added == ["mmseg.NonFiniteLossHook", "mmseg.RandomStateHook"]
    assert cfg.custom_hooks[0] == dict(type="PreemptionHook", requeue=False)  # its options win
    cfg = Config(dict(custom_hooks=[dict(type="mmseg.NonFiniteLossHook"), RandomStateHook()]))
    assert add_guard_hooks(cfg) == ["mmseg.PreemptionHook"]
    assert add_guard_hooks(cfg) == []  # idempotent
    cfg = Config.fromfile(TINY_FCN)  # hamseg's runtime base: ChannelsLastHook, no guards
    add_guard_hooks(cfg)
    types = [hook["type"] for hook in cfg.custom_hooks]
    guards = ["mmseg.PreemptionHook", "mmseg.NonFiniteLossHook", "mmseg.RandomStateHook"]
    assert types == ["mmseg.ChannelsLastHook", *guards]
    checkpoint = cfg.default_hooks.checkpoint  # made atomic, its options kept
    assert checkpoint == dict(type="mmseg.AtomicCheckpointHook", by_epoch=False, interval=5)
    from mmengine.registry import HOOKS  # the root registry, whatever the default scope

    hooks = [ChannelsLastHook, PreemptionHook, NonFiniteLossHook, RandomStateHook]
    assert [HOOKS.get(t) for t in types] == hooks


def test_an_aborting_ctrl_c_is_one_line_and_exit_130(capsys):
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as exit_:
        run_cli(interrupted)
    assert exit_.value.code == 130
    assert capsys.readouterr().err == (
        "interrupted: stopped at once, no checkpoint of this iteration\n"
    )
