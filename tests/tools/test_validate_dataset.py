"""tools/validate_dataset.py as a user runs it: ``--cfg-options data_root=PATH`` moves every split
(as in train/test), every split the config defines is read by default, ``--split`` restricts."""

from __future__ import annotations

import os
import os.path as osp
import shutil
import subprocess
import sys

import cv2
import pytest

import hamseg  # noqa: F401  (before mmseg)
from hamseg.cli import build_config
from hamseg.datasets.checks import validate_splits
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
    proc = run_validate(config, "--cfg-options", f"data_root={bad}")
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
    missing = run_validate(config, "--cfg-options", f"data_root={bad}/nowhere")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert f"data_root folder {bad}/nowhere" in missing.stderr


CUSTOM = osp.join(REPO, "configs", "custom", "hamhead-nmf_r18-d8_custom.py")
#: The template's variables for a _mask.png layout (tests/tools/test_finetune_path.py writes it).
LAYOUT = ["img_dir=images", "ann_dir=masks", "seg_map_suffix=_mask.png"]


def run_validate(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, VALIDATE, *args, "--no-progress"]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)


def test_template_variables_on_the_command_line_change_what_is_read(tmp_path):
    """seg_map_suffix, img_dir, ann_dir given with --cfg-options are the ones read (they were
    ignored: the template had computed its datasets from its own values)."""
    from tests.tools.test_finetune_path import write_mask_layout

    root = write_mask_layout(str(tmp_path / "data"))
    proc = run_validate(CUSTOM, "--cfg-options", f"data_root={root}", *LAYOUT)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert proc.stdout.splitlines()[-3:] == [
        "no problems in 4 train samples",
        "no problems in 3 val samples",
        "test: the val samples (checked above)",
    ]
    options = {"data_root": root, "img_dir": "images", "ann_dir": "masks"}
    cfg = build_config(CUSTOM, {**options, "seg_map_suffix": "_label.png"})  # no such files
    reports = validate_splits(cfg, ["val"], progress=False)
    assert len(reports[0].problems) == 3
    assert all("_label.png" in problem for problem in reports[0].problems)


def write_flat_images(root: str) -> str:
    """images/NAME.jpg and masks/NAME_mask.png of 7 images, and one image without a mask."""
    from tests.tools.test_finetune_path import write_flat_layout

    write_flat_layout(root)
    shutil.rmtree(osp.join(root, "splits"))
    shutil.copy(osp.join(root, "images", "field_00.jpg"), osp.join(root, "images", "alone.jpg"))
    return root


def test_write_splits_splits_a_flat_layout_then_validates_it(tmp_path):
    root = write_flat_images(str(tmp_path / "data"))
    options = ["--cfg-options", f"data_root={root}", "split_dir=splits", *LAYOUT]
    proc = run_validate(CUSTOM, "--write-splits", "--val-fraction", "0.3", *options)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    train_file, val_file = (osp.join(root, "splits", f"{s}.txt") for s in ("train", "val"))
    train, val = (open(path).read().split() for path in (train_file, val_file))
    assert len(val) == 2 and len(train) == 5  # round(0.3 * 7) to val
    assert sorted(train + val) == [f"field_{i:02d}" for i in range(7)]  # not the unlabelled one
    lines = proc.stdout.splitlines()
    assert next(line for line in lines if line.startswith("wrote")) == (
        f"wrote 5 names to {train_file} and 2 to {val_file}; 1 image(s) without a label map "
        "left out (alone.jpg)"
    )
    assert lines[-3:-1] == ["no problems in 5 train samples", "no problems in 2 val samples"]
    again = run_validate(CUSTOM, "--write-splits", *options)  # never over existing files
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert f"error: --write-splits: {train_file} exists and is kept" in again.stderr
    assert open(train_file).read().split() == train


def test_write_splits_is_seeded_and_refuses_what_is_not_a_flat_layout(tmp_path):
    from hamseg.datasets.splits import write_split_files
    from hamseg.utils.errors import UsageError

    root = write_flat_images(str(tmp_path / "data"))
    written = []
    for name in ("a", "b", "c"):
        options = {"data_root": root, "split_dir": name, "img_dir": "images", "ann_dir": "masks"}
        cfg = build_config(CUSTOM, {**options, "seg_map_suffix": "_mask.png"})
        write_split_files(cfg, 0.5, seed=1 if name == "c" else 0)
        written.append(open(osp.join(root, name, "val.txt")).read().split())
    assert written[0] == written[1] != written[2] and len(written[0]) == 4  # round(3.5)
    with pytest.raises(UsageError, match="--write-splits is for a flat layout.*set split_dir"):
        write_split_files(build_config(CUSTOM, {"data_root": root}), 0.2)
    with pytest.raises(UsageError, match="--val-fraction 1.0: give a fraction between 0 and 1"):
        write_split_files(cfg, 1.0)
    refused = run_validate(CUSTOM, "--val-fraction", "0.1")
    assert refused.returncode == 2 and "--val-fraction is an option of --write-splits" in (
        refused.stderr
    )
