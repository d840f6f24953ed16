"""--resume: mmseg 1.2.2's flag and meaning (compared with mmseg's own tools/train.py), and
hamseg's safety where mmseg has none (a config file's own load_from is a fine-tuning start)."""

import os
import os.path as osp
import shutil

import mmseg
import pytest
import torch
from mmengine.config import Config

from hamseg.cli import CLIError
from hamseg.cli.common import NOTICES
from hamseg.cli.resume import apply_resume, check_resumed_schedule, finished_run
from tests.conftest import TINY_FCN
from tests.helpers import TRAIN, data_options, run_tool, run_tool_here

MMSEG_TRAIN = osp.join(osp.dirname(mmseg.__file__), ".mim", "tools", "train.py")
#: mmseg's own script, after ``import hamseg`` (on mmcv-lite mmseg.models needs hamseg's ops).
MMSEG = (
    "import hamseg, runpy, sys; sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def checkpoint(path, step: int, seed: int = 7) -> str:
    torch.save(dict(meta=dict(iter=step, seed=seed), state_dict=dict(w=torch.ones(2))), path)
    return str(path)


def config(work: str, **entries) -> Config:
    return Config(dict(work_dir=work, randomness=dict(seed=None), **entries))


def test_resume_with_load_from_on_the_command_line_resumes_it_as_mmseg(tmp_path):
    path = checkpoint(tmp_path / "iter_3.pth", 3, seed=5)
    cfg = config(str(tmp_path / "work"), load_from=path)
    assert apply_resume(cfg, True, {"load_from": path}) == path
    assert cfg.resume is True and cfg.load_from == path and cfg.randomness.seed == 5
    cfg = config(str(tmp_path), resume=True)  # without the flag: mmseg's cfg.resume = args.resume
    assert apply_resume(cfg, False) is None and cfg.resume is False


def test_a_config_files_load_from_is_a_fine_tuning_start(tmp_path):
    work = tmp_path / "work"
    pretrained = checkpoint(tmp_path / "pretrained.pth", 60, seed=1)
    cfg = config(str(work), load_from=pretrained)
    assert apply_resume(cfg, True) is None  # no checkpoint in the work dir: a new run
    assert cfg.resume is False and cfg.load_from == pretrained and cfg.randomness.seed is None
    work.mkdir()
    checkpoint(work / "iter_4.pth", 4, seed=11)
    latest = checkpoint(work / "iter_8.pth", 8, seed=11)
    (work / "iter_12.pth").write_bytes(b"PK\x03\x04 cut short")  # incomplete: skipped
    (work / "last_checkpoint").write_text(str(work / "iter_12.pth"))
    cfg = config(str(work), load_from=pretrained)
    assert apply_resume(cfg, True) == latest
    assert cfg.resume is True and cfg.load_from == latest and cfg.randomness.seed == 11


def test_missing_checkpoints_are_one_line_errors(tmp_path):
    stage1 = "work_dirs/ham_voc/iter_60000.pth"
    for resume, options in ((False, None), (True, None), (True, {"load_from": stage1})):
        with pytest.raises(CLIError) as err:
            apply_resume(config(str(tmp_path / "work"), load_from=stage1), resume, options)
        assert str(err.value) == (
            f"load_from checkpoint not found: {stage1}, relative to {os.getcwd()} "
            "(set another with --cfg-options load_from=PATH)"
        )
    url = config(str(tmp_path), load_from="https://download.openmmlab.com/x.pth")
    assert apply_resume(url, False) is None  # remote files are mmengine's to fetch


def test_a_complete_run_and_another_schedule_are_one_line(tmp_path):
    path = str(tmp_path / "iter_4.pth")
    states = [dict(end=1, last_step=4), dict(end=4, last_step=4)]
    torch.save(dict(meta=dict(iter=4), param_schedulers=states), path)
    assert finished_run(Config(dict(train_cfg=dict(max_iters=4))), path).startswith(
        f"{path} is at iter 4 of max_iters=4: the run is complete"
    )
    assert finished_run(Config(dict(train_cfg=dict(max_iters=5))), path) is None
    scheds = [dict(type="PolyLR", by_epoch=False, begin=0, end=end) for end in (1, 8)]
    longer = Config(dict(train_cfg=dict(max_iters=8), param_scheduler=scheds))
    check_resumed_schedule(longer, path)  # mmengine resumes the checkpoint's, with a warning
    assert NOTICES[-1].startswith(f"--resume {path}: its schedulers end at [1, 4], this config")


@pytest.mark.parametrize(
    "args,expected",
    [
        (["--resume", "nope.py"], "error: config file not found: nope.py"),  # config=nope.py
        ([TINY_FCN, "--resume", "a.pth"], "--resume takes no path: --resume --cfg-options"),
    ],
)
def test_resume_is_mmsegs_flag(args, expected, monkeypatch, capsys):
    code, _, err = run_tool_here(TRAIN, args, monkeypatch, capsys)
    assert code == 2 and expected in err.strip().splitlines()[-1]


def train(tool: str, work: str, root: str, *argv: str, options: tuple = ()) -> str:
    """tiny_fcn.py for 4 iterations (checkpoints every 2) by hamseg's or mmseg's train.py."""
    script = ["-c", MMSEG, MMSEG_TRAIN] if tool == "mmseg" else [TRAIN]
    options = (
        *data_options(root),
        "train_cfg.max_iters=4",
        "default_hooks.checkpoint.interval=2",
        *options,
    )
    result = run_tool([*script, *argv, "--work-dir", work, "--cfg-options", *options])
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


def weights(path: str) -> dict:
    return torch.load(path, map_location="cpu")["state_dict"]


@pytest.mark.slow
def test_both_resume_lines_do_what_mmseg_does(tmp_path, tiny_data):
    first = str(tmp_path / "A")
    train("hamseg", first, tiny_data, TINY_FCN, options=("train_cfg.max_iters=2",))
    start = osp.join(first, "iter_2.pth")
    ends = {}
    for tool in ("hamseg", "mmseg"):
        # tools/train.py CFG --resume --work-dir B --cfg-options load_from=A/iter_2.pth
        work = str(tmp_path / f"B_{tool}")
        log = train(tool, work, tiny_data, TINY_FCN, "--resume", options=(f"load_from={start}",))
        assert "resumed epoch: 0, iter: 2" in log, tool
        assert not osp.exists(osp.join(work, "iter_2.pth"))  # not a new run from iteration 0
        ends[tool] = weights(osp.join(work, "iter_4.pth"))
        # tools/train.py --resume CFG: config=CFG, the work dir's latest checkpoint
        work = str(tmp_path / f"C_{tool}")
        shutil.copytree(first, work)
        log = train(tool, work, tiny_data, "--resume", TINY_FCN)
        assert "resumed epoch: 0, iter: 2" in log, tool
        assert torch.load(osp.join(work, "iter_4.pth"))["meta"]["iter"] == 4
    for name, value in ends["mmseg"].items():
        torch.testing.assert_close(ends["hamseg"][name], value, msg=name)


@pytest.mark.slow
def test_a_bare_resume_on_a_config_with_load_from_starts_a_new_run_then_continues(
    tmp_path, tiny_data
):
    pretrained = str(tmp_path / "pretrained")
    train("hamseg", pretrained, tiny_data, TINY_FCN)
    finetune = tmp_path / "finetune.py"
    finetune.write_text(f"_base_ = [{TINY_FCN!r}]\nload_from = '{pretrained}/iter_4.pth'\n")
    work = str(tmp_path / "work")
    log = train("hamseg", work, tiny_data, str(finetune), "--resume")
    assert "a new run from load_from=" in log and "resumed" not in log  # mmseg: resumes iter 4
    assert torch.load(osp.join(work, "iter_2.pth"))["meta"]["iter"] == 2
    dump, notices = log.index("Config:"), log.index("hamseg's notices of this run")
    assert dump < notices < log.index("Saving checkpoint at 2 iterations")  # after the dump
    assert "a new run from load_from=" in log[notices:]
    os.remove(osp.join(work, "iter_4.pth"))
    log = train("hamseg", work, tiny_data, str(finetune), "--resume")
    assert f"latest complete checkpoint {work}/iter_2.pth" in log
    assert "resumed epoch: 0, iter: 2" in log
