"""The tools load every split through the checked transforms: mmcv/mmseg's LoadImageFromFile /
LoadAnnotations become the checked drop-ins with the same arguments (one info line), the
reduce_zero_label mapping (ADE20K) is mmseg's exactly, and the SegNeXt ADE20K configs, which keep
mmseg's pipelines, load through them from the tools' config builder."""

from __future__ import annotations

import os
import os.path as osp

import cv2
import numpy as np
import pytest

import hamseg  # noqa: F401  (before mmseg)
from hamseg.cli import build_config
from hamseg.datasets.checks import check_dataset_paths, use_checked_loaders
from hamseg.datasets.loading import CheckedLoadAnnotations, InvalidSampleError
from tests.conftest import REPO

SEGNEXT_T = osp.join(
    REPO, "configs", "segnext", "segnext_mscan-t_1xb16-adamw-160k_ade20k-512x512.py"
)


@pytest.fixture
def logged(monkeypatch) -> list[str]:
    import mmengine.logging

    messages: list[str] = []

    def keep(msg: str, **_) -> None:
        if "checked transforms" in msg:  # not mmengine's registry messages
            messages.append(msg)

    monkeypatch.setattr(mmengine.logging, "print_log", keep)
    return messages


def ade_mask(path: str, extra: int | None = None) -> np.ndarray:
    """A 7x9 ADE-style label map: 0 ('other'), 1, 75, 150 (the last class), 255; ``extra`` too."""
    raw = np.zeros((7, 9), np.uint8)
    raw[1:3, 1:4] = 1
    raw[3:5, 2:8] = 75
    raw[5:, :5] = 150
    raw[0, 8] = 255
    if extra is not None:
        raw[6, 8] = extra
    cv2.imwrite(path, raw)
    return raw


@pytest.mark.parametrize("explicit", [True, None], ids=["reduce_zero_label=True", "from dataset"])
def test_reduce_zero_label_maps_exactly_like_mmseg(tmp_path, explicit):
    from mmseg.datasets.transforms import LoadAnnotations

    path = str(tmp_path / "ADE_train_00000001.png")
    raw = ade_mask(path)

    def sample() -> dict:
        return dict(seg_map_path=path, reduce_zero_label=True, seg_fields=[], ori_shape=(7, 9))

    ours = CheckedLoadAnnotations(num_classes=150, reduce_zero_label=explicit)(sample())
    theirs = LoadAnnotations(reduce_zero_label=explicit)(sample())
    assert ours["gt_seg_map"].dtype == theirs["gt_seg_map"].dtype == np.uint8
    np.testing.assert_array_equal(ours["gt_seg_map"], theirs["gt_seg_map"])
    expected = {0: 255, 1: 0, 75: 74, 150: 149, 255: 255}
    for value, label in expected.items():
        assert set(ours["gt_seg_map"][raw == value].tolist()) == {label}, value
    assert ours["seg_fields"] == ["gt_seg_map"]


def test_unchecked_loaders_become_the_checked_ones_with_their_arguments(logged):
    from mmengine.config import Config

    load_labels = dict(type="mmseg.LoadAnnotations", reduce_zero_label=True)
    cfg = Config(
        dict(
            model=dict(decode_head=dict(num_classes=5, ignore_index=250)),
            train_dataloader=dict(
                dataset=dict(
                    type="BaseSegDataset",
                    pipeline=[
                        dict(type="LoadImageFromFile", imdecode_backend="pillow", to_float32=True),
                        load_labels,
                        dict(type="PackSegInputs"),
                    ],
                )
            ),
            test_dataloader=dict(
                dataset=dict(
                    type="BaseSegDataset",
                    pipeline=[
                        dict(type="mmcv.LoadImageFromFile", backend_args=None),
                        dict(type="TestTimeAug", transforms=[[dict(type="LoadAnnotations")]]),
                    ],
                )
            ),
        )
    )
    replaced = use_checked_loaders(cfg)
    assert replaced == [
        "train: LoadImageFromFile -> CheckedLoadImageFromFile",
        "train: LoadAnnotations -> CheckedLoadAnnotations(num_classes=5, ignore_index=250)",
        "test: LoadImageFromFile -> CheckedLoadImageFromFile",
        "test: LoadAnnotations -> CheckedLoadAnnotations(num_classes=5, ignore_index=250)",
    ]
    train = cfg.train_dataloader.dataset.pipeline
    assert train[0] == dict(
        type="CheckedLoadImageFromFile", imdecode_backend="pillow", to_float32=True
    )
    assert train[1] == dict(
        type="mmseg.CheckedLoadAnnotations", reduce_zero_label=True, num_classes=5, ignore_index=250
    )
    assert train[2] == dict(type="PackSegInputs")
    test = cfg.test_dataloader.dataset.pipeline
    assert test[0] == dict(type="mmseg.CheckedLoadImageFromFile", backend_args=None)
    assert test[1].transforms[0][0] == dict(
        type="CheckedLoadAnnotations", num_classes=5, ignore_index=250
    )
    assert len(logged) == 1 and logged[0].startswith("train, test data: loading with hamseg's")
    assert "LoadAnnotations -> CheckedLoadAnnotations(num_classes=5, ignore_index=250)" in logged[0]
    assert use_checked_loaders(cfg) == [] and len(logged) == 1  # once: nothing left to replace


def test_label_loader_is_kept_when_the_class_count_is_unknown(logged):
    from mmengine.config import Config

    cfg = Config(
        dict(
            val_dataloader=dict(
                dataset=dict(type="UnknownDataset", pipeline=[dict(type="LoadAnnotations")])
            )
        )
    )
    assert use_checked_loaders(cfg) == []
    assert cfg.val_dataloader.dataset.pipeline == [dict(type="LoadAnnotations")] and not logged


def write_tiny_ade(root: str, bad_value: int | None = None) -> str:
    """mmseg's ADE20K layout, one odd-sized training and validation sample each."""
    for split in ("training", "validation"):
        os.makedirs(osp.join(root, "images", split))
        os.makedirs(osp.join(root, "annotations", split))
        cv2.imwrite(osp.join(root, "images", split, "a.jpg"), np.full((7, 9, 3), 120, np.uint8))
        ade_mask(osp.join(root, "annotations", split, "a.png"), bad_value)
    return root


def test_segnext_ade20k_config_loads_through_the_checked_transforms(tmp_path, logged):
    """configs/segnext/*_ade20k keep mmseg's pipelines (only the decode head changes); through
    the tools' config builder and checks they load with the checked transforms, mmseg's
    arguments kept, and a bad label is one error naming the file."""
    from mmengine.registry import init_default_scope
    from mmseg.registry import DATASETS

    root = write_tiny_ade(str(tmp_path / "ade"), bad_value=151)
    cfg = build_config(SEGNEXT_T, {"data_root": root}, work_dir=str(tmp_path / "w"))
    original = {
        s: [dict(step) for step in cfg[f"{s}_dataloader"].dataset.pipeline]
        for s in ("train", "val")
    }
    cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline  # what tools/test.py --tta does
    check_dataset_paths(cfg)
    for split in ("train", "val"):
        pipeline = cfg[f"{split}_dataloader"].dataset.pipeline
        for before, after in zip(original[split], pipeline):
            if before["type"] == "LoadImageFromFile":
                assert after == dict(before, type="CheckedLoadImageFromFile")
            elif before["type"] == "LoadAnnotations":
                assert before == dict(type="LoadAnnotations", reduce_zero_label=True)
                assert after == dict(
                    before, type="CheckedLoadAnnotations", num_classes=150, ignore_index=255
                )
            else:
                assert after == before
    tta = cfg.test_dataloader.dataset.pipeline
    assert tta[0]["type"] == "CheckedLoadImageFromFile" and "backend_args" in tta[0]
    assert tta[1]["transforms"][2] == [
        dict(type="CheckedLoadAnnotations", num_classes=150, ignore_index=255)
    ]
    assert len(logged) == 1 and "train, val, test data" in logged[0]

    init_default_scope("mmseg")
    val = DATASETS.build(cfg.val_dataloader.dataset)
    with pytest.raises(InvalidSampleError) as info:
        val[0]
    message = str(info.value)
    assert osp.join(root, "annotations", "validation", "a.png") in message
    assert "[151]" in message and "outside [0, 150) after reduce_zero_label" in message

    ade_mask(osp.join(root, "annotations", "validation", "a.png"))  # fixed
    packed = val[0]
    raw = cv2.imread(osp.join(root, "annotations", "validation", "a.png"), cv2.IMREAD_UNCHANGED)
    expected = np.where(raw == 0, 255, raw.astype(np.int64) - 1)
    expected[raw == 255] = 255
    np.testing.assert_array_equal(packed["data_samples"].gt_sem_seg.data[0].numpy(), expected)
