"""check_dataset_paths on a split without labels (VOC 2012 test): accepted when complete, one clear
line naming the missing folder or list (and where the data comes from) otherwise, and an error
when such a split would load or evaluate labels."""

from __future__ import annotations

import os
import os.path as osp

import pytest
import torch
from mmengine.config import Config

from hamseg.datasets.checks import (
    DatasetNotFoundError,
    check_dataset_paths,
    is_label_free,
    prepare_commands,
)
from tests.conftest import REPO
from tests.robust.helpers import TEST, run_tool

VOC_TEST = osp.join(REPO, "configs", "ham_voc_test.py")
LIST = osp.join("ImageSets", "Segmentation", "test.txt")
PREPARE_VOC_AUG = prepare_commands()["voc_aug"]


def voc_test_cfg(root: str) -> Config:
    cfg = Config.fromfile(VOC_TEST)
    cfg.test_dataloader.dataset.data_root = root
    return cfg


@pytest.fixture
def root(tmp_path) -> str:
    """VOC2012 with the test images and list, and no SegmentationClass folder."""
    root = tmp_path / "VOC2012"
    os.makedirs(root / "JPEGImages")
    os.makedirs(root / "ImageSets" / "Segmentation")
    (root / LIST).write_text("2008_000001\n")
    return str(root)


def error(cfg: Config) -> str:
    with pytest.raises(DatasetNotFoundError) as info:
        check_dataset_paths(cfg, splits=("test",))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_a_complete_label_free_split_is_accepted(root):
    cfg = voc_test_cfg(root)
    assert is_label_free(cfg.test_dataloader.dataset)
    assert not is_label_free(cfg.val_dataloader.dataset)  # val keeps its labels
    check_dataset_paths(cfg, splits=("test",))
    cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline  # what --tta does
    check_dataset_paths(cfg, splits=("test",))


def test_missing_test_list_names_it_and_says_where_the_data_comes_from(root):
    os.remove(osp.join(root, LIST))
    message = error(voc_test_cfg(root))
    assert message.startswith("test_dataloader (PascalVOCDataset")
    assert f"not found: split file (ann_file) {osp.join(root, LIST)}." in message
    assert "tar -xf VOC2012test.tar -C data/" in message and PREPARE_VOC_AUG not in message


def test_missing_test_folder(tmp_path):
    missing = str(tmp_path / "nowhere" / "VOC2012")
    message = error(voc_test_cfg(missing))
    assert f"not found: data_root folder {missing}." in message
    assert "VOC2012test.tar" in message


def test_labelled_voc_split_keeps_the_converter_hint(tmp_path):
    cfg = Config.fromfile(osp.join(REPO, "configs", "ham_voc_trainval.py"))
    cfg.test_dataloader.dataset.data_root = str(tmp_path / "none")
    assert PREPARE_VOC_AUG in error(cfg)


def test_a_label_free_split_must_not_load_labels(root):
    cfg = voc_test_cfg(root)
    trainval = Config.fromfile(osp.join(REPO, "configs", "ham_voc_trainval.py"))
    cfg.test_dataloader.dataset.pipeline = trainval.tta_pipeline  # loads annotations
    message = error(cfg)
    assert "has no labels (data_prefix without seg_map_path)" in message
    assert "its pipeline loads them (CheckedLoadAnnotations" in message


def test_a_label_free_split_must_not_be_evaluated_against_labels(root):
    cfg = voc_test_cfg(root)
    cfg.test_evaluator = dict(type="IoUMetric", iou_metrics=["mIoU"])
    assert "test_evaluator IoUMetric compares with labels" in error(cfg)
    cfg.test_evaluator = [dict(type="IoUMetric", format_only=True, output_dir=root)]
    check_dataset_paths(cfg, splits=("test",))
    cfg.test_evaluator = dict(type="VOCSubmissionMetric", output_dir=root)  # default: True
    check_dataset_paths(cfg, splits=("test",))


def test_tools_test_gives_one_line_and_exit_2(root, tmp_path):
    os.remove(osp.join(root, LIST))
    checkpoint = tmp_path / "any.pth"
    torch.save(dict(state_dict={}), checkpoint)  # not loaded: the data check comes first
    args = [TEST, VOC_TEST, str(checkpoint), "--work-dir", str(tmp_path / "work")]
    result = run_tool([*args, "--cfg-options", f"test_dataloader.dataset.data_root={root}"])
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert lines[0].startswith("error: test_dataloader (PascalVOCDataset")
    assert osp.join(root, LIST) in lines[0] and "VOC2012test.tar" in lines[0]
