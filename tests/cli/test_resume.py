"""apply_resume: what --resume means for tools/train.py, on configs with and without load_from."""

from __future__ import annotations

import os
import os.path as osp

import pytest
import torch
from mmengine.config import Config

from hamseg.cli import CLIError
from hamseg.cli.resume import apply_resume, check_resumed_schedule


def checkpoint(path, step: int, seed: int = 7) -> str:
    torch.save(dict(meta=dict(iter=step, seed=seed), state_dict=dict(w=torch.ones(2))), path)
    return str(path)


def config(work: str, **entries) -> Config:
    return Config(dict(work_dir=work, randomness=dict(seed=None), **entries))


def test_bare_resume_without_checkpoints_starts_fresh_from_load_from(tmp_path):
    pretrained = checkpoint(tmp_path / "pretrained.pth", 60, seed=1)
    cfg = config(str(tmp_path / "work"), load_from=pretrained, resume=False)
    assert apply_resume(cfg, "auto") is None
    assert cfg.resume is False and cfg.load_from == pretrained  # weights only, iteration 0
    assert cfg.randomness.seed is None  # a new run: its own seed


def test_bare_resume_takes_the_latest_checkpoint_of_the_work_dir(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    pretrained = checkpoint(tmp_path / "pretrained.pth", 60, seed=1)
    checkpoint(work / "iter_4.pth", 4, seed=11)
    latest = checkpoint(work / "iter_8.pth", 8, seed=11)
    (work / "iter_12.pth").write_bytes(b"PK\x03\x04 cut short")  # incomplete: skipped
    cfg = config(str(work), load_from=pretrained)
    assert apply_resume(cfg, "auto") == latest
    assert cfg.resume is True and cfg.load_from == latest  # never a partial file
    assert cfg.randomness.seed == 11  # the sampler replays the original run's order


def test_resume_from_a_path_and_a_configured_seed_is_kept(tmp_path):
    path = checkpoint(tmp_path / "iter_3.pth", 3, seed=5)
    cfg = Config(dict(work_dir=str(tmp_path), randomness=dict(seed=0, deterministic=True)))
    assert apply_resume(cfg, path) == path
    assert cfg.resume is True and cfg.load_from == path
    assert cfg.randomness == dict(seed=0, deterministic=True)


def test_missing_checkpoints_are_one_line_errors(tmp_path):
    stage1 = "work_dirs/ham_voc/iter_60000.pth"
    cfg = config(str(tmp_path / "work"), load_from=stage1)
    for resume in (None, "auto"):
        with pytest.raises(CLIError) as err:
            apply_resume(cfg.copy(), resume)
        assert str(err.value) == (
            f"load_from checkpoint not found: {stage1}, relative to {os.getcwd()} "
            "(set another with --cfg-options load_from=PATH)"
        )
    with pytest.raises(FileNotFoundError, match="checkpoint to resume from not found: gone.pth"):
        apply_resume(config(str(tmp_path)), "gone.pth")
    url = config(str(tmp_path), load_from="https://download.openmmlab.com/x.pth")
    assert apply_resume(url, None) is None  # remote files are mmengine's to fetch
    assert not osp.exists(tmp_path / "work")


def test_a_config_that_resumes_by_itself_also_skips_partial_files(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    complete = checkpoint(work / "iter_4.pth", 4)
    (work / "iter_8.pth").write_bytes(b"PK\x03\x04 cut short")
    (work / "last_checkpoint").write_text(str(work / "iter_8.pth"))  # e.g. plain mmengine's
    cfg = config(str(work), resume=True)
    assert apply_resume(cfg, None) == complete and cfg.load_from == complete


def test_resuming_with_other_scheduler_ends_is_refused_in_one_line(tmp_path):
    trained = Config(dict(train_cfg=dict(max_iters=4)))
    path = str(tmp_path / "iter_2.pth")
    states = [dict(end=1, last_step=2), dict(end=4, last_step=2)]
    torch.save(dict(meta=dict(iter=2, cfg=trained.pretty_text), param_schedulers=states), path)
    same = Config(dict(train_cfg=dict(max_iters=4), param_scheduler=schedulers(1, 4)))
    check_resumed_schedule(same, path)
    check_resumed_schedule(
        Config(dict(train_cfg=dict(max_iters=3), param_scheduler=schedulers(1, 4))), path
    )  # the loop's end alone: as mmseg
    longer = Config(dict(train_cfg=dict(max_iters=8), param_scheduler=schedulers(1, 8)))
    with pytest.raises(CLIError) as err:
        check_resumed_schedule(longer, path)
    assert str(err.value) == (
        f"--resume {path}: it was trained with schedulers ending at [1, 4] (max_iters=4), this "
        "config's end at [1, 8] (max_iters=8), and resuming keeps the checkpoint's: resume it "
        f"with --cfg-options max_iters=4, or train longer from its weights in a new run "
        f"(--cfg-options load_from={path} max_iters=8, without --resume; or --extend-schedule: "
        "this config's schedulers, rebuilt at the checkpoint's iteration)"
    )


def schedulers(*ends: int) -> list[dict]:
    return [dict(type="PolyLR", by_epoch=False, begin=0, end=end) for end in ends]
