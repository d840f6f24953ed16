"""The data checks: every bad sample of a split is one line naming the file and what is wrong
(the scan before iteration 1 and tools/validate_dataset.py); a config's missing folders or split
files name the path and the command that prepares them; class counts; label-free splits."""

from __future__ import annotations

import os
import os.path as osp
import shutil

import cv2
import numpy as np
import pytest
from mmengine.config import Config
from PIL import Image

from hamseg.cli import build_config
from hamseg.datasets.checks import (
    ClassCountError,
    check_dataset_paths,
    check_num_classes,
    sample_problems,
    validate_splits,
)
from tests.conftest import REPO, TINY_FCN, write_tiny_dataset

SEGNEXT_ADE = osp.join(
    REPO, "configs", "segnext", "segnext_mscan-t_1xb16-adamw-160k_ade20k-512x512.py"
)
TOOL = "python tools/dataset_converters/"


@pytest.fixture
def data(tmp_path) -> str:
    """A fresh copy of the tiny 3-class dataset (6 train, 2 val; odd sizes), free to break."""
    return write_tiny_dataset(str(tmp_path / "data"))


def ann(root: str, index: int, split: str = "train") -> str:
    return osp.join(root, "ann_dir", split, f"{index:03d}.png")


def img(root: str, index: int, split: str = "train") -> str:
    return osp.join(root, "img_dir", split, f"{index:03d}.jpg")


def put_values(path: str, values: list[int], dtype=np.uint8) -> None:
    label = cv2.imread(path, cv2.IMREAD_UNCHANGED).astype(dtype)
    label[0, : len(values)] = values
    cv2.imwrite(path, label)


def problems(root: str, split: str = "train", **options) -> list[str]:
    cfg = build_config(TINY_FCN, {"data_root": root, **options})
    return validate_splits(cfg, [split], progress=False)[0].problems


def truncate(path: str, keep: float) -> None:
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[: int(len(data) * keep)])


BREAKS = {  # what breaks sample 2 (37x37) -> (the file named, the words saying what is wrong)
    "out of range": (
        lambda d: put_values(ann(d, 2), [7, 9, 255]),
        ann,
        "[7, 9] are outside [0, 3)",
    ),
    "16-bit": (lambda d: put_values(ann(d, 2), [257], np.uint16), ann, "[257] are outside"),
    "cut jpeg": (lambda d: truncate(img(d, 2), 0.5), img, "truncated"),
    "garbage label": (lambda d: open(ann(d, 2), "wb").write(b"not a png"), ann, "corrupt"),
    "empty image": (lambda d: open(img(d, 2), "wb").close(), img, "corrupt"),
    "missing label": (lambda d: os.remove(ann(d, 2)), ann, "No such file"),
    "size": (lambda d: cv2.imwrite(ann(d, 2), np.zeros((20, 21), np.uint8)), ann, "(20, 21) diff"),
    "channels": (lambda d: cv2.imwrite(ann(d, 2), np.ones((37, 37, 3))), ann, "(37, 37, 3) diff"),
}


@pytest.mark.parametrize("name", BREAKS)
def test_a_bad_sample_is_one_line_naming_the_file_and_the_problem(data, name):
    breaks, path, words = BREAKS[name]
    assert problems(data) == []
    breaks(data)
    (line,) = problems(data)
    assert repr(path(data, 2)) in line and words in line and "\n" not in line, line


def test_palette_pngs_and_the_ignore_index_pass(data):
    label = Image.fromarray(cv2.imread(ann(data, 0), cv2.IMREAD_UNCHANGED), mode="P")
    label.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0] + [0] * (256 * 3 - 9))
    label.save(ann(data, 0))
    put_values(ann(data, 1), [255, 255])
    assert problems(data) == []
    put_values(ann(data, 1), [250])  # the head's ignore_index is the one checked
    assert "[250]" in problems(data)[0]
    assert "[255]" in problems(data, **{"model.decode_head.ignore_index": 250})[0]


@pytest.mark.parametrize(
    "reduce_zero_label, label_map", [(False, None), (True, None), (False, {0: 2, 2: 0, 1: 255})]
)
def test_the_values_refused_are_those_mmseg_maps_outside_the_classes(
    tmp_path, reduce_zero_label, label_map
):
    from mmseg.datasets.transforms import LoadAnnotations

    raw = np.arange(256, dtype=np.uint8).reshape(16, 16)
    cv2.imwrite(path := str(tmp_path / "label.png"), raw)
    cv2.imwrite(image := str(tmp_path / "image.png"), np.zeros((16, 16, 3), np.uint8))
    info = dict(seg_map_path=path, reduce_zero_label=reduce_zero_label, label_map=label_map)
    mapped = LoadAnnotations()(dict(info, seg_fields=[]))["gt_seg_map"]
    refused = sorted(int(v) for v in raw[(mapped >= 4) & (mapped != 255)])
    (found,) = sample_problems((None, None, 4, 255, dict(info, img_path=image)))
    listed = found.split("[")[1].split("]")[0].split(" and ")[0].split(", ")
    assert [int(v) for v in listed] == refused[:20]


def write_tiny_ade(root: str, bad_value: int) -> str:
    """mmseg's ADE20K layout: one odd-sized sample per split, labels 0, 1, 150, 255."""
    for split in ("training", "validation"):
        os.makedirs(osp.join(root, "images", split))
        os.makedirs(osp.join(root, "annotations", split))
        cv2.imwrite(osp.join(root, "images", split, "a.jpg"), np.full((7, 9, 3), 120, np.uint8))
        label = np.array([[0, 1, 150, 255] * 2 + [bad_value]] * 7, np.uint8)
        cv2.imwrite(osp.join(root, "annotations", split, "a.png"), label)
    return root


def test_mmseg_configs_are_checked_with_their_reduce_zero_label(tmp_path):
    root = write_tiny_ade(str(tmp_path / "ade"), bad_value=151)
    cfg = build_config(SEGNEXT_ADE, {"data_root": root})
    ((line,),) = [r.problems for r in validate_splits(cfg, ["val"], progress=False)]
    assert osp.join(root, "annotations", "validation", "a.png") in line
    assert "[151] are outside [0, 150) after reduce_zero_label" in line
    write_tiny_ade(str(tmp_path / "ade2"), bad_value=0)
    cfg = build_config(SEGNEXT_ADE, {"data_root": str(tmp_path / "ade2")})
    assert validate_splits(cfg, ["val"], progress=False)[0].problems == []


def test_every_problem_of_every_split_is_listed_and_a_split_read_once(data):
    put_values(ann(data, 1), [3, 4])
    truncate(img(data, 4), 0.3)
    put_values(ann(data, 1, "val"), [5])
    reports = validate_splits(build_config(TINY_FCN, {"data_root": data}), workers=2)
    assert [r.summary() for r in reports] == [
        "2 problems in 6 train samples",
        "1 problem in 2 val samples",
        "test: the val samples (checked above)",
    ]
    assert ann(data, 1) in reports[0].problems[0] and img(data, 4) in reports[0].problems[1]
    cfg = build_config(TINY_FCN, {"data_root": data, "test_dataloader": None})
    with pytest.raises(FileNotFoundError, match=r"no test_dataloader with a dataset"):
        validate_splits(cfg, ["test"])


@pytest.mark.parametrize(
    "config, root, command",
    [
        ("ham_voc.py", "VOCdevkit/VOC2012", "voc_aug.py {devkit} {devkit}/VOCaug"),
        ("ham_context.py", "VOCdevkit/VOC2010", "pascal_context.py {devkit} {root}/trainval_"),
        (
            "demo/hamhead-nmf_r18-d8_context-shapes.py",
            "shapes",
            "context_shapes.py --out-dir {root}",
        ),
    ],
)
def test_a_missing_dataset_names_its_folder_and_the_command_that_prepares_it_there(
    tmp_path, monkeypatch, config, root, command
):
    missing = str(tmp_path / "data" / root)
    cfg = build_config(osp.join(REPO, "configs", config), {"data_root": missing})
    with pytest.raises(FileNotFoundError) as info:
        check_dataset_paths(cfg)
    command = command.format(root=missing, devkit=osp.dirname(missing))
    assert f"data_root folder {missing}" in str(info.value) and command in str(info.value)
    # at the configs' own places the commands are data/README.md's
    default = Config.fromfile(osp.join(REPO, "configs", config)).train_dataloader.dataset
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as info:
        check_dataset_paths(Config(dict(train_dataloader=dict(dataset=default))))
    line = str(info.value).split("it with: ")[1].split(" (after")[0].split(" --out-dir")[0]
    assert line.startswith(TOOL) and line in open(osp.join(REPO, "data", "README.md")).read()


def test_a_missing_split_file_or_subfolder(data):
    ann_file = {"train_dataloader.dataset.ann_file": "splits/train.txt"}
    with pytest.raises(FileNotFoundError) as info:
        check_dataset_paths(build_config(TINY_FCN, {"data_root": data, **ann_file}))
    assert f"split file (ann_file) {osp.join(data, 'splits/train.txt')}" in str(info.value)
    assert "docs/custom_dataset.md" in str(info.value)  # a BaseSegDataset: the user's data
    shutil.rmtree(osp.join(data, "ann_dir", "val"))
    cfg = build_config(TINY_FCN, {"data_root": data})
    with pytest.raises(FileNotFoundError, match=r"val_dataloader.*seg_map_path folder .*ann_dir"):
        check_dataset_paths(cfg)
    check_dataset_paths(cfg, splits=("train",))  # only what is asked for


def test_num_classes_must_match_the_dataset(data):
    cfg = build_config(TINY_FCN, {"data_root": data, "model.decode_head.num_classes": 5})
    with pytest.raises(ClassCountError, match=r"decode_head.num_classes=5 .* has 3 classes"):
        check_dataset_paths(cfg)
    custom = osp.join(REPO, "configs", "custom", "hamhead-nmf_r18-d8_custom.py")
    cfg = build_config(custom, {"data_root": data, "classes": ["a", "b", "c", "d"]})
    with pytest.raises(ClassCountError, match=r"train_dataloader dataset: palette does not match"):
        validate_splits(cfg)  # mmseg's error at the dataset's build, on one line
    voc = Config.fromfile(osp.join(REPO, "configs/ham_voc.py"))
    voc.model.decode_head.num_classes = 20  # the classic "forgot the background" mistake
    with pytest.raises(ClassCountError, match=r"PascalVOCDataset\) has 21 .*num_classes=21"):
        check_num_classes(voc)


def test_a_label_free_split_is_scanned_without_labels(tmp_path):
    """configs/ham_voc_test.py on a VOC2012 folder with two test images and no labels."""
    root = tmp_path / "VOC2012"
    os.makedirs(root / "JPEGImages")
    os.makedirs(root / "ImageSets" / "Segmentation")
    for name, w in (("a", 13), ("b", 17)):
        cv2.imwrite(str(root / "JPEGImages" / f"{name}.jpg"), np.zeros((11, w, 3), np.uint8))
    options = {"test_dataloader.dataset.data_root": str(root), "test_evaluator.output_dir": "x"}
    cfg = build_config(osp.join(REPO, "configs", "ham_voc_test.py"), options)
    with pytest.raises(FileNotFoundError, match=r"test.txt\. Extract VOC2012test.tar"):
        check_dataset_paths(cfg, ["test"])
    (root / "ImageSets" / "Segmentation" / "test.txt").write_text("a\nb\n")
    (report,) = validate_splits(cfg, ["test"], progress=False)
    assert report.summary() == "no problems in 2 test samples"
    os.remove(root / "JPEGImages" / "b.jpg")
    assert "b.jpg': No such file" in validate_splits(cfg, ["test"])[0].problems[0]
