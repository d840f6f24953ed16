"""HamNet configs for the datasets mmseg users train on: Cityscapes 512x1024 (80k) and ADE20K
512x512 (80k, 160k), R-50-D8 and R-101-D8, on mmseg's own dataset and schedule bases. Not trained
here: each builds and runs one CPU training iteration at a tiny crop on a tiny dataset in the
dataset's own layout (``--cfg-options crop_size=...`` reaches mmseg's pipeline)."""

from __future__ import annotations

import glob
import math
import os
import os.path as osp

import cv2
import numpy as np
import pytest
from mmengine.runner import Runner

import hamseg  # noqa: F401  (before mmseg)
from hamseg.cli import build_config
from hamseg.datasets.checks import check_dataset_paths
from tests.conftest import REPO
from tests.helpers import one_thread  # noqa: F401  (fixture)

HAMNET = osp.join(REPO, "configs", "hamnet")
CONFIGS = sorted(
    osp.basename(p)
    for p in glob.glob(osp.join(HAMNET, "hamnet_r*-d8_4xb*.py"))
    if "cityscapes" in p or "ade20k" in p
)
CROP = (33, 49)  # odd, tiny


def write_image_and_label(img: str, label: str, values: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    h, w = 41 + 2 * seed, 67
    os.makedirs(osp.dirname(img), exist_ok=True)
    os.makedirs(osp.dirname(label), exist_ok=True)
    cv2.imwrite(img, rng.integers(0, 255, (h, w, 3), dtype=np.uint8))
    cv2.imwrite(label, rng.integers(0, values, (h, w), dtype=np.uint8))


@pytest.fixture(scope="module")
def roots(tmp_path_factory) -> dict[str, str]:
    """Two train images of each dataset, in its layout (mmseg's dataset classes and suffixes)."""
    city, ade = (str(tmp_path_factory.mktemp(name)) for name in ("cityscapes", "ade"))
    for i in range(2):
        stem = f"aachen/aachen_{i:06d}_000019"
        write_image_and_label(
            osp.join(city, "leftImg8bit", "train", f"{stem}_leftImg8bit.png"),
            osp.join(city, "gtFine", "train", f"{stem}_gtFine_labelTrainIds.png"),
            19,
            i,
        )
        write_image_and_label(  # 0 = "other", reduce_zero_label maps 1..150 to 0..149
            osp.join(ade, "images", "training", f"ADE_train_{i:08d}.jpg"),
            osp.join(ade, "annotations", "training", f"ADE_train_{i:08d}.png"),
            151,
            i,
        )
    return {"cityscapes": city, "ade20k": ade}


def test_six_configs_named_the_openmmlab_way_on_mmseg_bases():
    assert CONFIGS == [
        "hamnet_r101-d8_4xb2-80k_cityscapes-512x1024.py",
        "hamnet_r101-d8_4xb4-160k_ade20k-512x512.py",
        "hamnet_r101-d8_4xb4-80k_ade20k-512x512.py",
        "hamnet_r50-d8_4xb2-80k_cityscapes-512x1024.py",
        "hamnet_r50-d8_4xb4-160k_ade20k-512x512.py",
        "hamnet_r50-d8_4xb4-80k_ade20k-512x512.py",
    ]
    for name in CONFIGS:
        text = open(osp.join(HAMNET, name), encoding="utf-8").read()
        cfg = build_config(osp.join(HAMNET, name))
        city = "cityscapes" in name
        iters = 160000 if "160k" in name else 80000
        assert ("mmseg::_base_/datasets/" in text) != ('_base_ = ["./' in text)  # or R101
        assert cfg.train_dataloader.dataset.type == (
            "CityscapesDataset" if city else "ADE20KDataset"
        )
        assert cfg.model.data_preprocessor.size == ((512, 1024) if city else (512, 512))
        assert cfg.train_dataloader.batch_size == (2 if city else 4)
        assert cfg.train_cfg.max_iters == cfg.param_scheduler[0]["end"] == iters
        assert cfg.optim_wrapper.optimizer == dict(
            type="SGD", lr=0.01, momentum=0.9, weight_decay=0.0005
        )
        depth = 101 if "r101" in name else 50
        assert cfg.model.backbone.depth == depth
        assert cfg.model.pretrained == f"open-mmlab://resnet{depth}_v1c"
        classes = 19 if city else 150
        assert cfg.model.decode_head.num_classes == cfg.model.auxiliary_head.num_classes == classes
        assert cfg.model.decode_head.type == "HamHead" and cfg.custom_imports.imports == ["hamseg"]
        ham = cfg.model.decode_head.ham_cfg  # the paper's protocol, as mmseg's other heads
        assert (ham.eval_seed, ham.eval_draws) == (None, 1)


def one_iteration(name: str, roots: dict[str, str], tmp_path) -> dict[str, float]:
    """One training iteration of the config at :data:`CROP`, from scratch, on the tiny data."""
    root = roots["cityscapes" if "cityscapes" in name else "ade20k"]
    options = {
        "data_root": root,
        "crop_size": CROP,  # a variable of mmseg's dataset base and of ours: both follow
        "model.pretrained": None,  # no ImageNet download
        "train_dataloader.num_workers": 0,
        "train_dataloader.persistent_workers": False,
        "train_cfg.max_iters": 1,
        "param_scheduler.0.end": 1,
        "default_hooks.checkpoint": None,
    }
    cfg = build_config(osp.join(HAMNET, name), options, work_dir=str(tmp_path / name))
    assert cfg.train_dataloader.dataset.pipeline[3]["crop_size"] == CROP
    assert cfg.model.data_preprocessor.size == CROP
    cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    cfg.test_cfg = cfg.test_dataloader = cfg.test_evaluator = None
    check_dataset_paths(cfg, ("train",))  # hamseg's checked loaders, as tools/train.py
    cfg.randomness = dict(seed=0)
    runner = Runner.from_cfg(cfg)
    runner.train()
    hub = runner.message_hub
    assert runner.iter == 1
    return {
        key: hub.get_scalar(f"train/{key}").current() for key in ("decode.loss_ce", "aux.loss_ce")
    }


def check_losses(losses: dict[str, float], name: str) -> None:
    """Untrained heads: cross-entropy about ln(classes) (the auxiliary one weighted 0.4)."""
    classes = 19 if "cityscapes" in name else 150
    assert all(math.isfinite(v) for v in losses.values()), losses
    assert 0.3 * math.log(classes) < losses["decode.loss_ce"] < 3 * math.log(classes), losses
    assert 0.1 < losses["aux.loss_ce"] / losses["decode.loss_ce"] < 1.6, losses


#: One config per dataset in the default suite (7-8 s each); the R-101 and 160k ones are slow.
FAST = ("hamnet_r50-d8_4xb2-80k_cityscapes-512x1024.py", "hamnet_r50-d8_4xb4-80k_ade20k-512x512.py")


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=() if n in FAST else pytest.mark.slow) for n in CONFIGS]
)
def test_one_cpu_iteration_at_a_tiny_crop(roots, tmp_path, name):
    check_losses(one_iteration(name, roots, tmp_path), name)
