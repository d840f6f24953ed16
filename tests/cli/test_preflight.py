"""What the tools check before iteration 1 (hamseg/cli/preflight.py): every sample of the splits
the run reads, a schedule that ends at max_iters (one knob moves it), a run already complete;
and the smaller checks of issue 26 (a split file with suffixed names, a relative load_from)."""

from __future__ import annotations

import os
import os.path as osp
import shlex

import pytest
import torch
from mmengine.config import Config

from hamseg.cli import CLIError, build_config
from hamseg.cli.preflight import check_schedule
from hamseg.cli.resume import apply_resume, finished_run
from hamseg.datasets.checks import DatasetNotFoundError, check_dataset_paths
from tests.conftest import REPO, TINY_FCN, write_tiny_dataset
from tests.robust.helpers import TRAIN, data_options, run_tool

CUSTOM = osp.join(REPO, "configs", "custom", "hamhead-nmf_r18-d8_custom.py")


def test_one_knob_moves_loop_schedule_and_intervals_and_only_a_half_set_one_is_refused():
    cfg = build_config(CUSTOM, {"max_iters": 30})
    assert cfg.train_cfg.max_iters == cfg.train_cfg.val_interval == 30
    assert [s["end"] for s in cfg.param_scheduler] == [20, 30]  # the warm-up keeps its length
    assert cfg.default_hooks.checkpoint.interval == 30
    assert check_schedule(cfg, {"max_iters": 30}) is None
    # mmseg's smoke test: the loop's length alone, trained as mmseg trains it, with one line
    options = {"train_cfg.max_iters": 30}
    assert check_schedule(build_config(CUSTOM, options), options) == (
        "--cfg-options train_cfg.max_iters=30: the last param_scheduler ends at iteration 500, "
        "train_cfg.max_iters=30, trained as mmseg trains it (--cfg-options max_iters=30 would "
        "move the schedulers' ends too)"
    )
    options = {"param_scheduler.1.end": 300}  # a scheduler's end set half-way
    with pytest.raises(CLIError) as err:
        check_schedule(build_config(CUSTOM, options), options)
    assert str(err.value).startswith(
        "--cfg-options param_scheduler.1.end leaves the last param_scheduler ending at "
        "iteration 300 but train_cfg.max_iters=500: set the length with --cfg-options max_iters=N"
    )
    assert check_schedule(build_config(CUSTOM, options), options, allow_mismatch=True)
    tiny = build_config(TINY_FCN, {"max_iters": 7})  # no max_iters variable: train_cfg's value
    assert tiny.train_cfg.max_iters == tiny.param_scheduler[0]["end"] == 7
    short = build_config(CUSTOM, {"max_iters": 2})  # shorter than the 20-iteration warm-up
    assert [(s["begin"], s["end"]) for s in short.param_scheduler] == [(0, 1), (0, 2)]
    assert check_schedule(short) is None


def test_an_mmseg_config_whose_schedule_ends_early_trains_with_a_warning(tmp_path, tiny_data):
    ocrnet = build_config("mmseg::ocrnet/ocrnet_r101-d8_8xb2-80k_cityscapes-512x1024.py")
    assert check_schedule(ocrnet) == (
        "the last param_scheduler ends at iteration 40000, train_cfg.max_iters=80000 as the "
        "config is written: trained as mmseg trains it"
    )
    config = tmp_path / "early.py"  # mmseg-style: the scheduler ends after the loop
    config.write_text(
        f"_base_ = [{TINY_FCN!r}]\n"
        "param_scheduler = [dict(type='PolyLR', power=0.9, begin=0, end=6, by_epoch=False)]\n"
        "train_cfg = dict(max_iters=4)\n"
    )
    work = str(tmp_path / "work")
    result = run_tool(
        [TRAIN, str(config), "--work-dir", work, "--cfg-options", *data_options(tiny_data)]
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ends at iteration 6, train_cfg.max_iters=4 as the config is written" in result.stdout
    assert torch.load(osp.join(work, "iter_4.pth"))["meta"]["iter"] == 4


def test_resuming_a_complete_run_says_so(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    path = str(work / "iter_15.pth")
    torch.save(dict(meta=dict(iter=15, epoch=0, seed=3), state_dict={}), path)
    (work / "last_checkpoint").write_text(path)
    cfg = Config(dict(work_dir=str(work), train_cfg=dict(max_iters=15)))
    assert finished_run(cfg, apply_resume(cfg, "auto")) == (
        f"{path} is at iter 15 of max_iters=15: the run is complete, nothing to train (to train "
        f"longer, start a new run from its weights: --cfg-options load_from={path} max_iters=N, "
        "without --resume)"
    )
    assert finished_run(Config(dict(train_cfg=dict(max_iters=16))), path) is None
    result = run_tool([TRAIN, TINY_FCN, "--work-dir", str(work), "--resume"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "the run is complete, nothing to train" in result.stdout
    assert "Advance dataloader" not in result.stdout + result.stderr  # nothing re-run


def test_a_relative_load_from_says_where_it_was_read(tmp_path, monkeypatch):
    logged: list[str] = []
    monkeypatch.setattr("hamseg.cli.resume.print_log", lambda message, *_: logged.append(message))
    cfg = Config(dict(work_dir=str(tmp_path), load_from="configs/custom/../../README.md"))
    apply_resume(cfg, None)
    assert logged == [
        f"load_from={cfg.load_from}, relative to {os.getcwd()}: {osp.abspath(cfg.load_from)}"
    ]


def test_a_split_file_with_suffixed_names_is_one_line(tmp_path):
    root = write_tiny_dataset(str(tmp_path / "data"), n_train=2, n_val=1)
    with open(osp.join(root, "train.txt"), "w") as handle:
        handle.write("000.jpg\n001.jpg\n")
    cfg = Config.fromfile(TINY_FCN)
    cfg.merge_from_dict({"train_dataloader.dataset.data_root": root})
    cfg.train_dataloader.dataset.update(ann_file="train.txt", img_suffix=".jpg")
    with pytest.raises(DatasetNotFoundError) as err:
        check_dataset_paths(cfg, ["train"])
    assert str(err.value) == (
        f"train_dataloader: split file {root}/train.txt lists names with the image suffix "
        "(000.jpg), and img_suffix '.jpg' is added to each (000.jpg.jpg): list names without it "
        "(000)"
    )


def test_bad_data_stops_before_iteration_1_or_names_the_validate_command(tmp_path):
    root = write_tiny_dataset(str(tmp_path / "data"))
    bad_val = osp.join(root, "img_dir", "val", "001.jpg")
    with open(bad_val, "wb") as handle:
        handle.write(b"\xff\xd8 truncated jpeg")
    work = str(tmp_path / "work")
    args = [TRAIN, TINY_FCN, "--work-dir", work, "--cfg-options", *data_options(root)]
    result = run_tool([*args, "max_iters=2"])
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Iter(train)" not in result.stdout and not osp.exists(osp.join(work, "iter_1.pth"))
    assert result.stderr.splitlines()[-2].startswith(f"image file {bad_val!r} is corrupt")
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: 1 bad sample(s) before the first iteration, listed above")
    # the suggested command checks what this run reads: the user's --cfg-options repeated
    again = shlex.join(["python", "tools/validate_dataset.py", TINY_FCN, *args[4:], "max_iters=2"])
    assert last.endswith(f"check again with `{again}`"), last
    assert "data scan: no problems in 6 train samples; 1 problem in 2 val samples" in result.stdout

    bad_train = osp.join(root, "img_dir", "train", "000.jpg")
    os.replace(bad_val, bad_train)  # val is clean now; the scan is skipped
    result = run_tool([*args, "max_iters=2", "--skip-data-check"])
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: image file {bad_train!r} is corrupt"), last
    assert last.endswith(f"; list every bad file at once: {again}"), last


def test_the_suggested_validate_command_repeats_the_users_cfg_options():
    from hamseg.cli.preflight import validate_command

    argv = ["c.py", "--work-dir", "w", "--cfg-options", "data_root=/my data", "a.b=1", "--resume"]
    assert validate_command("my c.py", [*argv, "--cfg-options=img_dir=x"]) == (
        "python tools/validate_dataset.py 'my c.py' --cfg-options 'data_root=/my data' a.b=1 "
        "img_dir=x"
    )
    assert validate_command("c.py", ["c.py", "--amp"]) == "python tools/validate_dataset.py c.py"
