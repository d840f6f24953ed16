"""tools/dataset_converters/{voc_aug,pascal_context}.py on tiny synthetic copies of the official
downloads, run as a user runs them: the commands the data checks print for a missing dataset, from
a working directory holding a miniature ``data/`` tree."""

from __future__ import annotations

import json
import os
import os.path as osp
import shlex
import subprocess
import sys

import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmseg.datasets import PascalContextDataset59
from mmseg.registry import DATASETS
from PIL import Image
from scipy.io import savemat

from hamseg.cli import build_config
from hamseg.datasets.checks import validate_splits
from hamseg.evaluation import voc_palette
from tests.conftest import REPO

TOOL = "python tools/dataset_converters/"  # the commands of data/README.md and the data checks
VOC_AUG = f"{TOOL}voc_aug.py data/VOCdevkit data/VOCdevkit/VOCaug"
CONTEXT = f"{TOOL}pascal_context.py data/VOCdevkit data/VOCdevkit/VOC2010/trainval_merged.json"
#: The 59 PASCAL Context classes as ids of the 459 labels (labels.txt), mmseg's class order.
CONTEXT59_IDS = [2, 9, 18, 19, 22, 23, 25, 31, 33, 34, 44, 45, 46, 59, 65, 68, 72, 80, 85, 98]
CONTEXT59_IDS += [104, 105, 113, 115, 144, 158, 159, 162, 187, 189, 207, 220, 232, 258, 259]
CONTEXT59_IDS += [260, 284, 295, 296, 308, 324, 326, 347, 349, 354, 355, 360, 366, 368, 397]
CONTEXT59_IDS += [415, 416, 420, 424, 427, 440, 445, 454, 458]


def run(command: str, *extra: str) -> subprocess.CompletedProcess:
    """``python tools/dataset_converters/<tool>.py ARGS`` in the working directory."""
    words = shlex.split(command)
    cmd = [sys.executable, osp.join(REPO, words[1]), *words[2:], *extra]
    env = dict(os.environ, PYTHONPATH=REPO)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)


def error_line(out: subprocess.CompletedProcess) -> str:
    """Exit code 2, no traceback; the last stderr line (a progress bar may precede it)."""
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-3000:]
    return out.stderr.strip().splitlines()[-1]


def write_lines(path: str, lines: list[str]) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.writelines(line + "\n" for line in lines)


def write_jpg(path: str, h: int, w: int, rng) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(path)


@pytest.fixture()
def voc_tree(tmp_path, monkeypatch):
    """data/VOCdevkit/VOC2012 (train a b c, val d e; VOC labels of a b c) and VOCaug (SBD's
    class maps of a b d x y): the SBD maps by id."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    voc, sbd = "data/VOCdevkit/VOC2012", "data/VOCdevkit/VOCaug/dataset"
    write_lines(f"{voc}/ImageSets/Segmentation/train.txt", ["a", "b", "c"])
    write_lines(f"{voc}/ImageSets/Segmentation/val.txt", ["d", "e"])
    write_lines(f"{sbd}/train.txt", ["a", "x", "d"])
    write_lines(f"{sbd}/val.txt", ["b", "y"])
    os.makedirs(f"{sbd}/cls")
    maps = {}
    for i, image_id in enumerate(["a", "b", "d", "x", "y"]):
        h, w = 20 + i, 31 - i
        maps[image_id] = rng.integers(0, 21, (h, w)).astype(np.uint8)
        gt = {"Segmentation": maps[image_id], "Boundaries": np.zeros((h, w), np.uint8)}
        savemat(f"{sbd}/cls/{image_id}.mat", {"GTcls": gt})
        write_jpg(f"{voc}/JPEGImages/{image_id}.jpg", h, w, rng)
    for image_id in ["c", "e"]:
        write_jpg(f"{voc}/JPEGImages/{image_id}.jpg", 24, 24, rng)
    for image_id, h, w in [("a", 20, 31), ("b", 21, 30), ("c", 24, 24)]:
        os.makedirs(f"{voc}/SegmentationClass", exist_ok=True)
        label = rng.integers(0, 21, (h, w)).astype(np.uint8)
        Image.fromarray(label).save(f"{voc}/SegmentationClass/{image_id}.png")
    return maps


def test_voc_aug_writes_the_sbd_labels_and_lists_that_the_recipe_loads(voc_tree):
    out = run(VOC_AUG)
    assert out.returncode == 0, out.stderr[-3000:]
    voc = "data/VOCdevkit/VOC2012"
    for image_id, expected in voc_tree.items():
        png = np.array(Image.open(f"{voc}/SegmentationClassAug/{image_id}.png"))
        assert png.dtype == np.uint8 and np.array_equal(png, expected), image_id
    sets = f"{voc}/ImageSets/Segmentation"
    assert open(f"{sets}/aug.txt").read().split() == ["x", "y"]  # SBD minus VOC train/val
    assert open(f"{sets}/trainaug.txt").read().split() == ["a", "b", "c", "x", "y"]
    assert "aug.txt: 2 images, trainaug.txt: 5 images" in out.stdout
    assert "10582" in out.stderr and "SBD .mat -> PNG" in out.stderr  # real size; progress bar
    init_default_scope("mmseg")
    dataset = DATASETS.build(
        Config.fromfile(osp.join(REPO, "configs/ham_voc.py")).train_dataloader.dataset
    )
    assert len(dataset) == 5  # VOC train a b c + aug x y = trainaug
    label = dataset[4]["data_samples"].gt_sem_seg.data  # "y", from SegmentationClassAug
    assert set(label.unique().tolist()) <= set(range(21))


def test_voc_aug_names_what_is_missing_or_corrupt_in_one_line(voc_tree, tmp_path, monkeypatch):
    mat = "data/VOCdevkit/VOCaug/dataset/cls/x.mat"
    with open(mat, "r+b") as f:
        f.truncate(120)
    for nproc in ("1", "2"):
        error = error_line(run(VOC_AUG, "--nproc", nproc))
        assert error.startswith(f"error: SBD class map '{mat}' cannot be read (")
    savemat(mat, {"Other": np.zeros((2, 3))})  # a MATLAB file of something else
    assert error_line(run(VOC_AUG)) == f"error: SBD class map '{mat}' holds no 'GTcls' variable"
    os.makedirs(tmp_path / "empty")
    monkeypatch.chdir(tmp_path / "empty")
    error = error_line(run(VOC_AUG))
    assert "SBD class maps not found: data/VOCdevkit/VOCaug/dataset/cls" in error
    assert "benchmark.tgz" in error


@pytest.fixture()
def release_tree(voc_tree):
    """VOC 2012 val labels for d (in SBD too) and e, palette PNGs with VOC's 255 border band, and
    trainval.txt: VOC's trainval labels are a b c d e, SBD's a b d x y."""
    voc = "data/VOCdevkit/VOC2012"
    write_lines(f"{voc}/ImageSets/Segmentation/trainval.txt", ["a", "b", "c", "d", "e"])
    rng = np.random.default_rng(1)
    for image_id, (h, w) in (("d", (22, 29)), ("e", (24, 24))):
        label = rng.integers(0, 21, (h, w)).astype(np.uint8)
        label[:, 5] = 255
        image = Image.fromarray(label, mode="P")
        image.putpalette(voc_palette())
        image.save(f"{voc}/SegmentationClass/{image_id}.png")
    return {i: np.array(Image.open(f"{voc}/SegmentationClass/{i}.png")) for i in "abcde"}


def stage2_release_labels() -> Config:
    """configs/ham_voc_trainval.py with the documented switch to the release's label folder."""
    option = {"train_dataloader.dataset.data_prefix.seg_map_path": "SegmentationClassAug"}
    return build_config(osp.join(REPO, "configs", "ham_voc_trainval.py"), option)


def test_voc_labels_mode_writes_the_release_union_where_voc_wins(voc_tree, release_tree):
    """SBD's 5 maps + VOC's 5 trainval labels, 3 in both: 7 labels (the real data: 11,355 +
    2,913 - 2,237 = 12,031), VOC's label where both have the image; before, the stage-2 switch's
    data scan names the 2 VOC-only labels it lacks."""
    assert run(VOC_AUG).returncode == 0
    (report,) = validate_splits(stage2_release_labels(), ("train",), progress=False)
    assert len(report.problems) == 2 and all("No such file" in p for p in report.problems)
    out = run(VOC_AUG, "--voc-labels")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "7 PNGs in data/VOCdevkit/VOC2012/SegmentationClassAug" in out.stdout
    assert "SBD 5 + VOC trainval 5 labels, 3 images in both: VOC's label kept." in out.stdout
    assert "12031 labels" in out.stderr
    folder = "data/VOCdevkit/VOC2012/SegmentationClassAug"
    assert sorted(os.listdir(folder)) == [f"{i}.png" for i in "abcdexy"]
    for image_id in "abcdexy":
        png = Image.open(f"{folder}/{image_id}.png")
        expected = release_tree.get(image_id, voc_tree.get(image_id))
        assert png.mode == "L" and np.array_equal(np.array(png), expected), image_id
    assert validate_splits(stage2_release_labels(), ("train",), progress=False)[0].problems == []
    Image.fromarray(np.zeros((24, 24, 3), np.uint8)).save(
        "data/VOCdevkit/VOC2012/SegmentationClass/e.png"
    )
    error = error_line(run(VOC_AUG, "--voc-labels"))
    assert "VOC label 'data/VOCdevkit/VOC2012/SegmentationClass/e.png' is a 'RGB'-mode" in error


@pytest.fixture()
def context_tree(tmp_path, monkeypatch):
    """data/VOCdevkit/VOC2010: trainval/<id>.mat label maps (full ids, odd sizes) and the Main
    train/val split, one val id without a .mat."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(1)
    root = "data/VOCdevkit/VOC2010"
    os.makedirs(f"{root}/trainval")
    maps = {}
    for i, image_id in enumerate(["2008_000002", "2008_000003", "2009_000001", "2010_000004"]):
        values = np.array([0, 1, 2, 9, 284, 458, 459, 100])  # 1 and 100: not in the 59
        maps[image_id] = values[rng.integers(0, len(values), (17 + i, 23))].astype(np.uint16)
        savemat(f"{root}/trainval/{image_id}.mat", {"LabelMap": maps[image_id]})
        write_jpg(f"{root}/JPEGImages/{image_id}.jpg", 17 + i, 23, rng)
    write_lines(f"{root}/ImageSets/Main/train.txt", ["2008_000002", "2009_000001"])
    write_lines(f"{root}/ImageSets/Main/val.txt", ["2008_000003", "2010_000004", "2010_999999"])
    return maps


def context60(label_map: np.ndarray) -> np.ndarray:
    lut = np.zeros(460, np.uint8)
    lut[CONTEXT59_IDS] = np.arange(1, 60)
    return lut[label_map]


def test_pascal_context_writes_the_labels_and_lists_that_both_recipes_load(context_tree):
    out = run(CONTEXT)  # the json does not exist: the Main split is used
    assert out.returncode == 0, out.stderr[-3000:]
    root = "data/VOCdevkit/VOC2010"
    for image_id, label_map in context_tree.items():
        png = np.array(Image.open(f"{root}/SegmentationClassContext/{image_id}.png"))
        assert np.array_equal(png, context60(label_map)), image_id
    sets = f"{root}/ImageSets/SegmentationContext"
    assert open(f"{sets}/train.txt").read().split() == ["2008_000002", "2009_000001"]
    assert open(f"{sets}/val.txt").read().split() == ["2008_000003", "2010_000004"]
    assert "4 PNGs in data/VOCdevkit/VOC2010/SegmentationClassContext; train 2, val 2" in out.stdout
    assert "1 val images" in out.stderr and "2010_999999" in out.stderr  # listed, not dropped
    init_default_scope("mmseg")
    for config, classes in (("ham_context_60.py", 60), ("ham_context.py", 59)):
        cfg = Config.fromfile(osp.join(REPO, "configs", config))
        dataset = DATASETS.build(cfg.val_dataloader.dataset)
        assert len(dataset) == 2 and len(dataset.metainfo["classes"]) == classes
        label = dataset[0]["data_samples"].gt_sem_seg.data[0].numpy()  # 2008_000003
        expected = context60(context_tree["2008_000003"]).astype(np.int64)
        if classes == 59:  # background ignored, classes shifted down
            expected = np.where(expected == 0, 255, expected - 1)
        assert np.array_equal(label, expected), config


def test_pascal_context_split_from_the_json_and_labels_txt_checked(context_tree):
    root = "data/VOCdevkit/VOC2010"
    images = [
        {"file_name": "2008_000002.jpg", "phase": "val"},
        {"file_name": "2008_000003.jpg", "phase": "train"},
        {"file_name": "2009_000001.jpg", "phase": "train"},
    ]
    with open(f"{root}/trainval_merged.json", "w") as f:
        json.dump({"images": images, "annos_segmentation": []}, f)
    names = {i: f"label{i}" for i in range(1, 460)}
    names.update(zip(CONTEXT59_IDS, PascalContextDataset59.METAINFO["classes"]))
    names[427] = "tv monitor"  # spaces and case are ignored
    write_lines(f"{root}/labels.txt", [f"{i}: {n}" for i, n in sorted(names.items())])
    out = run(CONTEXT)
    assert out.returncode == 0 and f"class ids checked against {root}/labels.txt" in out.stdout
    sets = f"{root}/ImageSets/SegmentationContext"
    assert open(f"{sets}/train.txt").read().split() == ["2008_000003", "2009_000001"]
    assert open(f"{sets}/val.txt").read().split() == ["2008_000002"]
    names[9] = "bagpipe"
    write_lines(f"{root}/labels.txt", [f"{i}: {n}" for i, n in sorted(names.items())])
    assert "9: expected 'bag', labels.txt has 'bagpipe'" in error_line(run(CONTEXT))
    assert run(CONTEXT, "--no-label-check").returncode == 0


def test_pascal_context_names_what_is_missing_or_corrupt_in_one_line(context_tree, tmp_path):
    mat = "data/VOCdevkit/VOC2010/trainval/2009_000001.mat"
    savemat(mat, {"LabelMap": np.full((3, 4), 460, np.uint16)})
    error = error_line(run(CONTEXT))
    assert error.startswith(f"error: PASCAL Context label map '{mat}': LabelMap values must")
    assert error.endswith("got 460..460")
    with open(mat, "wb") as f:
        f.write(b"not a MATLAB file")
    error = error_line(run(CONTEXT, "--nproc", "2"))
    assert error.startswith(f"error: PASCAL Context label map '{mat}' cannot be read (")
    os.makedirs(tmp_path / "empty")
    os.chdir(tmp_path / "empty")
    assert "trainval.tar.gz" in error_line(run(CONTEXT))
