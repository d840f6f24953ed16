"""tools/validate_dataset.py as a user runs it: ``--cfg-options data_root=PATH`` moves every split
(as in train/test), every split the config defines is read by default, ``--split`` restricts."""

from __future__ import annotations

import os
import os.path as osp
import subprocess
import sys

import cv2
import pytest

import hamseg  # noqa: F401  (before mmseg)
from hamseg.cli import build_config
from hamseg.datasets.checks import DatasetNotFoundError, validate_splits
from tests.conftest import REPO, TINY_FCN, write_tiny_dataset

VALIDATE = osp.join(REPO, "tools", "validate_dataset.py")


@pytest.fixture
def roots(tmp_path) -> tuple[str, str, str]:
    """(config, good data root, bad data root): the config's data_root is the good one; the bad
    one has a label value 7 in a val mask and a truncated train image."""
    good = write_tiny_dataset(str(tmp_path / "good"))
    bad = write_tiny_dataset(str(tmp_path / "bad"))
    mask = osp.join(bad, "ann_dir", "val", "001.png")
    label = cv2.imread(mask, cv2.IMREAD_UNCHANGED)
    label[0, 0] = 7
    cv2.imwrite(mask, label)
    with open(osp.join(bad, "img_dir", "train", "002.jpg"), "r+b") as handle:
        handle.truncate(100)
    config = tmp_path / "tiny.py"
    config.write_text(
        f"_base_ = [{TINY_FCN!r}]\n"
        f"data_root = {good!r}\n"
        "train_dataloader = dict(dataset=dict(data_root=data_root))\n"
        "val_dataloader = dict(dataset=dict(data_root=data_root))\n"
        "test_dataloader = val_dataloader\n"
    )
    return str(config), good, bad


def test_data_root_option_moves_every_split_and_every_split_is_read(roots):
    config, _, bad = roots
    cmd = [sys.executable, VALIDATE, config, "--no-progress", "--cfg-options", f"data_root={bad}"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-5:] == [
        next(ln for ln in lines if "002.jpg" in ln),
        "1 problem in 6 train samples",
        next(ln for ln in lines if "001.png" in ln),
        "1 problem in 2 val samples",
        "test: the val samples (checked above)",
    ]
    assert osp.join(bad, "img_dir", "train", "002.jpg") in lines[-5] and "corrupt" in lines[-5]
    assert osp.join(bad, "ann_dir", "val", "001.png") in lines[-3] and "[7]" in lines[-3]
    # tiny_fcn.py names mmseg's own loaders: the tool says it loads with the checked ones
    assert "LoadAnnotations -> CheckedLoadAnnotations(num_classes=3, ignore_index=255)" in (
        proc.stdout + proc.stderr
    )


def test_split_restricts_and_the_config_root_is_used_without_the_option(roots):
    config, good, bad = roots
    reports = validate_splits(build_config(config), progress=False)
    assert [r.summary() for r in reports] == [
        "no problems in 6 train samples",
        "no problems in 2 val samples",
        "test: the val samples (checked above)",
    ]
    cfg = build_config(config, {"data_root": bad})
    assert [r.summary() for r in validate_splits(cfg, ["val"], progress=False)] == [
        "1 problem in 2 val samples"
    ]
    with pytest.raises(DatasetNotFoundError, match=r"no test_dataloader .* defines: train"):
        validate_splits(
            build_config(config, {"test_dataloader": None, "val_dataloader": None}), ["test"]
        )


def test_data_root_together_with_the_same_per_split_root(roots):
    """data_root=X with <split>_dataloader.dataset.data_root=X (both ways a user may write it)
    means X, not the error that no dataset uses the data_root variable."""
    config, _, bad = roots
    options = {"data_root": bad}
    options.update({f"{s}_dataloader.dataset.data_root": bad for s in ("train", "val", "test")})
    cfg = build_config(config, options)
    assert [cfg[f"{s}_dataloader"].dataset.data_root for s in ("train", "val", "test")] == [bad] * 3
    summaries = [r.summary() for r in validate_splits(cfg, progress=False)]
    assert summaries[:2] == ["1 problem in 6 train samples", "1 problem in 2 val samples"]
