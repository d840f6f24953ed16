"""Bad data fails with one clear error naming the file and the problem.

Samples: out-of-range label values (reported), 16-bit values that uint8 would wrap, corrupt or
missing files, image/label size mismatch, multi-channel labels; raised by the data loader at the
first batch that holds the sample. Config: missing folders / split files (with the command that
prepares them), num_classes against the dataset's classes. The whole-dataset scan lists every
problem at once.
"""

from __future__ import annotations

import os.path as osp
import shutil

import cv2
import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import init_default_scope
from PIL import Image

from hamseg.datasets.checks import (
    DatasetNotFoundError,
    check_dataset_paths,
    check_num_classes,
    prepare_commands,
    validate_splits,
)
from hamseg.datasets.loading import CheckedLoadAnnotations, InvalidSampleError, label_problems
from tests.conftest import REPO, write_tiny_dataset
from tests.robust.helpers import TINY_HAM, TRAIN, data_options, run_tool, tiny_cfg

VALIDATE = osp.join(REPO, "tools", "validate_dataset.py")


@pytest.fixture
def data(tmp_path) -> str:
    """A fresh copy of the tiny 3-class dataset (6 train, 2 val), free to break."""
    return write_tiny_dataset(str(tmp_path / "data"))


def ann(root: str, index: int, split: str = "train") -> str:
    return osp.join(root, "ann_dir", split, f"{index:03d}.png")


def img(root: str, index: int, split: str = "train") -> str:
    return osp.join(root, "img_dir", split, f"{index:03d}.jpg")


def put_values(path: str, values: list[int]) -> None:
    label = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    for i, value in enumerate(values):
        label[0, i] = value
    cv2.imwrite(path, label)


def train_dataset(root: str, tmp_path):
    from mmseg.registry import DATASETS

    init_default_scope("mmseg")
    cfg = tiny_cfg(root, str(tmp_path / "work"))
    return DATASETS.build(cfg.train_dataloader.dataset)


def error_of(dataset, index: int) -> str:
    with pytest.raises(InvalidSampleError) as info:
        dataset[index]
    return str(info.value)


# ------------------------------------------------------------------------------------------
# One sample
# ------------------------------------------------------------------------------------------
def test_out_of_range_label_values_are_reported_with_the_file(data, tmp_path):
    put_values(ann(data, 2), [7, 9, 255])  # 255 is the ignore index: fine
    dataset = train_dataset(data, tmp_path)
    message = error_of(dataset, 2)
    assert ann(data, 2) in message and img(data, 2) in message
    assert "label values [7, 9] are outside [0, 3)" in message
    assert "ignore index 255" in message
    put_values(ann(data, 3), [255, 255])
    sample = dataset[3]  # ignore-index pixels alone are valid
    assert int(sample["data_samples"].gt_sem_seg.data.max()) == 255


def test_16_bit_values_that_uint8_would_wrap_are_caught(data, tmp_path):
    label = cv2.imread(ann(data, 1), cv2.IMREAD_UNCHANGED).astype(np.uint16)
    label[0, 0] = 257  # mmseg's astype(uint8) would silently turn this into class 1
    cv2.imwrite(ann(data, 1), label)
    assert "label values [257]" in error_of(train_dataset(data, tmp_path), 1)


def test_corrupt_and_missing_files_are_named(data, tmp_path):
    raw = open(img(data, 0), "rb").read()
    with open(img(data, 0), "wb") as handle:
        handle.write(raw[: len(raw) // 3])
    dataset = train_dataset(data, tmp_path)
    message = error_of(dataset, 0)
    assert f"image file {img(data, 0)!r} is corrupt" in message
    with open(ann(data, 4), "wb") as handle:
        handle.write(b"not a png at all")
    assert f"label file {ann(data, 4)!r} is corrupt" in error_of(dataset, 4)
    open(img(data, 5), "wb").close()
    assert f"image file {img(data, 5)!r} is empty" in error_of(dataset, 5)


def test_missing_label_file_is_named(data, tmp_path):
    dataset = train_dataset(data, tmp_path)
    shutil.os.remove(ann(data, 3))
    assert f"label file {ann(data, 3)!r} does not exist" in error_of(dataset, 3)


def test_image_and_label_of_different_sizes(data, tmp_path):
    cv2.imwrite(ann(data, 2), np.zeros((20, 21), np.uint8))
    message = error_of(train_dataset(data, tmp_path), 2)
    h, w = cv2.imread(img(data, 2)).shape[:2]
    assert f"label size 20x21 (HxW) differs from the image size {h}x{w}" in message
    assert ann(data, 2) in message


def test_multichannel_label_is_rejected(data, tmp_path):
    cv2.imwrite(ann(data, 1), np.zeros((33, 37, 3), np.uint8))
    cv2.imwrite(img(data, 1), np.zeros((33, 37, 3), np.uint8))
    assert "must have one channel" in error_of(train_dataset(data, tmp_path), 1)


def test_palette_png_labels_are_read_as_indices(data, tmp_path):
    label = Image.fromarray(cv2.imread(ann(data, 0), cv2.IMREAD_UNCHANGED), mode="P")
    label.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0] + [0] * (256 * 3 - 9))
    label.save(ann(data, 0))
    seg = train_dataset(data, tmp_path)[0]["data_samples"].gt_sem_seg.data
    assert set(seg.unique().tolist()) <= {0, 1, 2}


def test_reduce_zero_label_problems_name_raw_values():
    raw = np.array([[0, 1, 3], [255, 2, 4]], np.uint8)
    label, problems = label_problems(raw, num_classes=3, reduce_zero_label=True)
    assert label is None
    assert problems == [
        "label values [4] are outside [0, 3) after reduce_zero_label and are not the ignore "
        "index 255"
    ]


@pytest.mark.parametrize(
    "reduce_zero_label, label_map", [(False, None), (True, None), (False, {0: 2, 2: 0, 1: 255})]
)
def test_mapping_is_identical_to_mmseg_load_annotations(tmp_path, reduce_zero_label, label_map):
    from mmseg.datasets.transforms import LoadAnnotations

    path = str(tmp_path / "label.png")
    rng = np.random.default_rng(0)
    cv2.imwrite(path, rng.choice([0, 1, 2, 3, 255], size=(9, 11)).astype(np.uint8))
    results = dict(
        seg_map_path=path,
        reduce_zero_label=reduce_zero_label,
        label_map=label_map,
        seg_fields=[],
        ori_shape=(9, 11),
    )
    ours = CheckedLoadAnnotations(num_classes=4)(dict(results, seg_fields=[]))["gt_seg_map"]
    theirs = LoadAnnotations()(dict(results, seg_fields=[]))["gt_seg_map"]
    assert ours.dtype == theirs.dtype == np.uint8
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("workers", [0, 1])
def test_raised_at_the_first_batch_that_holds_the_sample(data, tmp_path, workers):
    from mmengine.runner import Runner

    put_values(ann(data, 3), [5])
    init_default_scope("mmseg")
    cfg = tiny_cfg(data, str(tmp_path / "work"))
    loader_cfg = cfg.train_dataloader.copy()
    loader_cfg.update(num_workers=workers, persistent_workers=False)
    loader_cfg.sampler = dict(type="DefaultSampler", shuffle=False)
    batches = iter(Runner.build_dataloader(loader_cfg, seed=0))
    first = next(batches)  # samples 0 and 1 are fine
    assert len(first["inputs"]) == 2
    with pytest.raises(InvalidSampleError, match=r"003\.png.*label values \[5\]"):
        next(batches)  # samples 2 and 3


# ------------------------------------------------------------------------------------------
# Config-level checks
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "config, root, command",
    [
        ("configs/ham_voc.py", "VOCdevkit/VOC2012", "voc_aug"),
        ("configs/ham_context.py", "VOCdevkit/VOC2010", "pascal_context"),
        ("configs/demo/hamhead-nmf_r18-d8_context-shapes.py", "context_shapes", "context_shapes"),
    ],
)
def test_missing_dataset_folder_names_path_and_prepare_command(tmp_path, config, root, command):
    """The command prepares the dataset where the config (here: moved) reads it."""
    cfg = Config.fromfile(osp.join(REPO, config))
    missing = str(tmp_path / "data" / root)
    for split in ("train", "val", "test"):
        dataset = cfg[f"{split}_dataloader"]["dataset"]
        for leaf in dataset.get("datasets", [dataset]):
            leaf["data_root"] = missing
    with pytest.raises(DatasetNotFoundError) as info:
        check_dataset_paths(cfg)
    assert isinstance(info.value, FileNotFoundError)
    message = str(info.value)
    command = prepare_commands(str(tmp_path / "data" / "VOCdevkit"), missing)[command]
    assert f"data_root folder {missing}" in message and command in message
    assert str(tmp_path) in command.split()[-1]  # the output folder is the config's


def test_prepare_commands_for_the_default_folders_are_the_documented_ones():
    converter = "python tools/dataset_converters/"
    assert prepare_commands() == {
        "voc_aug": f"{converter}voc_aug.py data/VOCdevkit data/VOCdevkit/VOCaug",
        "pascal_context": f"{converter}pascal_context.py data/VOCdevkit "
        "data/VOCdevkit/VOC2010/trainval_merged.json",
        "context_shapes": f"{converter}generate_context_shapes.py",
    }
    assert prepare_commands(shapes="data/context_shapes/") == prepare_commands()


def test_missing_split_file_and_subfolder_are_named(data, tmp_path):
    cfg = tiny_cfg(
        data, str(tmp_path / "w"), {"train_dataloader.dataset.ann_file": "splits/train.txt"}
    )
    with pytest.raises(DatasetNotFoundError) as info:
        check_dataset_paths(cfg)
    message = str(info.value)
    assert f"split file (ann_file) {osp.join(data, 'splits/train.txt')}" in message
    assert "docs/custom_dataset.md" in message  # a BaseSegDataset: the user's own data
    shutil.rmtree(osp.join(data, "ann_dir", "val"))
    cfg = tiny_cfg(data, str(tmp_path / "w"))
    with pytest.raises(
        DatasetNotFoundError, match=r"val_dataloader.*seg_map_path folder .*ann_dir/val"
    ):
        check_dataset_paths(cfg)
    check_dataset_paths(cfg, splits=("train",))  # only what is asked for


def test_unchecked_loaders_are_flagged(data, tmp_path, monkeypatch):
    import mmengine.logging

    from tests.conftest import TINY_FCN

    messages = []
    monkeypatch.setattr(mmengine.logging, "print_log", lambda msg, **kw: messages.append(msg))
    check_dataset_paths(tiny_cfg(data, str(tmp_path / "w")))
    assert messages == []  # tiny_ham.py uses the checked loaders
    cfg = Config.fromfile(TINY_FCN)
    for split in ("train", "val", "test"):
        cfg[f"{split}_dataloader"]["dataset"]["data_root"] = data
    check_dataset_paths(cfg, splits=("train",))
    assert len(messages) == 1
    assert "LoadAnnotations -> CheckedLoadAnnotations" in messages[0]
    assert "LoadImageFromFile -> CheckedLoadImageFromFile" in messages[0]


def test_num_classes_must_match_the_dataset(data, tmp_path):
    cfg = tiny_cfg(data, str(tmp_path / "w"), {"model.decode_head.num_classes": 5})
    with pytest.raises(ValueError, match=r"decode_head.num_classes=5 .* has 3 classes"):
        check_dataset_paths(cfg)
    voc = Config.fromfile(osp.join(REPO, "configs/ham_voc.py"))
    voc.model.decode_head.num_classes = 20  # the classic "forgot the background" mistake
    with pytest.raises(ValueError, match=r"num_classes=20 .*PascalVOCDataset\) has 21 classes"):
        check_num_classes(voc)
    with pytest.raises(ValueError, match=r"Set model.decode_head.num_classes=21 or change"):
        check_num_classes(voc)


def test_in_the_custom_template_the_class_count_error_names_classes_and_palette():
    """The template computes the head's num_classes from classes: a num_classes variable or a
    head override is not its knob; the error says which is."""
    from hamseg.cli import build_config

    custom = osp.join(REPO, "configs", "custom", "hamhead-nmf_r18-d8_custom.py")
    cfg = build_config(custom, {"model.decode_head.num_classes": 4})
    with pytest.raises(ValueError) as err:
        check_num_classes(cfg)
    assert "num_classes=" not in str(err.value).split(". ", 1)[1]
    assert "the classes and palette variables set the head and every dataloader" in str(err.value)
    assert "--cfg-options classes=... palette=..." in str(err.value)


# ------------------------------------------------------------------------------------------
# Whole dataset
# ------------------------------------------------------------------------------------------
def _break_three(data: str) -> None:
    put_values(ann(data, 1), [3, 4])
    with open(img(data, 2), "wb") as handle:
        handle.write(b"\xff\xd8 truncated jpeg")
    cv2.imwrite(ann(data, 4), np.zeros((8, 8), np.uint8))


def test_validate_dataset_lists_every_problem(data, tmp_path):
    cfg = tiny_cfg(data, str(tmp_path / "w"))
    assert validate_splits(cfg, ["train"], progress=False)[0].problems == []
    _break_three(data)
    report = validate_splits(cfg, ["train"], progress=False)[0]
    problems = report.problems
    assert report.num_samples == 6 and len(problems) == 3
    assert ann(data, 1) in problems[0] and "[3, 4]" in problems[0]
    assert img(data, 2) in problems[1] and "corrupt" in problems[1]
    assert ann(data, 4) in problems[2] and "label size 8x8" in problems[2]
    assert (
        validate_splits(cfg, ["val"], progress=False)[0].summary() == "no problems in 2 val samples"
    )


@pytest.mark.slow
def test_validate_tool_and_train_tool_report_bad_data(data, tmp_path):
    _break_three(data)
    result = run_tool(
        [
            VALIDATE,
            TINY_HAM,
            "--split",
            "train",
            "--workers",
            "2",
            "--cfg-options",
            *data_options(data),
        ]
    )
    assert result.returncode == 1, result.stderr[-2000:]
    assert "3 problems in 6 train samples" in result.stdout
    for path in (ann(data, 1), img(data, 2), ann(data, 4)):
        assert path in result.stdout
    assert "6/6" in result.stderr  # the progress bar
    clean = run_tool([VALIDATE, TINY_HAM, "--split", "val", "--cfg-options", *data_options(data)])
    assert clean.returncode == 0 and "no problems in 2 val samples" in clean.stdout

    work = str(tmp_path / "work")
    result = run_tool([TRAIN, TINY_HAM, "--work-dir", work, "--cfg-options", *data_options(data)])
    assert result.returncode == 2  # a user-facing error: one line, no traceback (run_cli)
    last = result.stderr.strip().splitlines()[-1]  # the error that stopped the run
    assert last.startswith("error: ") and "Traceback" not in result.stderr
    assert any(path in last for path in (ann(data, 1), img(data, 2), ann(data, 4))), last
    missing = run_tool(
        [
            TRAIN,
            TINY_HAM,
            "--work-dir",
            work,
            "--cfg-options",
            *data_options(str(tmp_path / "nowhere")),
        ]
    )
    assert missing.returncode == 2
    assert f"data_root folder {tmp_path / 'nowhere'}" in missing.stderr
