"""hamseg.compat.mmseg_inferencer: plain mmseg ``MMSegInferencer`` (after ``import hamseg``) on
hamseg's configs (checked loaders) and model names, giving hamseg.apis' label maps."""

from __future__ import annotations

import glob
import os.path as osp
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
from mmseg.apis import MMSegInferencer

from hamseg.apis import inference_model, init_model
from hamseg.compat import mmseg_inferencer
from tests.helpers import (
    DEMO_NMF,
    make_checkpoint,
    one_thread,  # noqa: F401  (fixture)
)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_checked_loaders_get_mmsegs_names_and_nothing_else_changes():
    pipeline = [
        dict(type="CheckedLoadImageFromFile", to_float32=True),
        dict(type="CheckedLoadAnnotations", num_classes=7),
        dict(type="Resize", scale=(33, 35)),
        dict(type="PackSegInputs"),
    ]
    mmseg_inferencer.as_mmseg_loaders(pipeline)
    assert pipeline == [
        dict(type="LoadImageFromFile", to_float32=True),
        dict(type="LoadAnnotations", num_classes=7),
        dict(type="Resize", scale=(33, 35)),
        dict(type="PackSegInputs"),
    ]


def test_names_mmsegs_first_then_hamsegs():
    lookup = MMSegInferencer._load_model_from_metafile
    this = SimpleNamespace(scope="mmseg")
    cfg, weights = lookup(this, "fcn_r50-d8_4xb2-40k_cityscapes-512x1024")  # mmseg's model
    assert cfg.model.decode_head.type == "FCNHead" and weights.startswith("https://")
    cfg, weights = lookup(this, "HamSeg-Demo")  # hamseg's alias, any case
    assert cfg.model.decode_head.type == "HamHead" and cfg.demo_name == "HamHead-NMF"
    assert weights == "work_dirs/demo/hamhead-nmf_r18-d8_context-shapes/iter_500.pth"
    cfg, weights = lookup(this, "hamseg::demo/hamhead-cd_r18-d8_context-shapes.py")
    assert cfg.model.decode_head.ham_cfg.type == "CD" and weights is None
    with pytest.raises(ValueError, match="^Cannot find model: no-such in mmseg's or hamseg's"):
        lookup(this, "no-such")


def test_plain_mmseg_inferencer_gives_hamseg_apis_label_maps(tmp_path):
    ckpt = make_checkpoint(str(tmp_path / "demo.pth"), seed=1)
    rng = np.random.default_rng(1)
    arrays = [rng.integers(0, 255, (h, w, 3), dtype=np.uint8) for h, w in ((37, 45), (29, 51))]
    path = str(tmp_path / "image.png")
    cv2.imwrite(path, arrays[1])
    model = init_model(DEMO_NMF, ckpt, device="cpu")
    expected = [inference_model(model, a).pred_sem_seg.data[0] for a in arrays]
    assert len(expected[0].unique()) > 1
    for source in (DEMO_NMF, "hamhead-nmf_r18-d8_context-shapes"):  # config path, model name
        inferencer = MMSegInferencer(source, weights=ckpt, device="cpu")
        assert list(inferencer.model.dataset_meta["classes"]) == list(model.dataset_meta["classes"])
        got = inferencer([arrays[0], path], return_datasamples=True)  # an array and a file
        for sample, labels in zip(got, expected):
            assert bool((sample.pred_sem_seg.data[0] == labels).all()), source
    out = inferencer(arrays[0], out_dir=str(tmp_path / "out"))  # mmseg's own outputs
    (written,) = [cv2.imread(p, 0) for p in glob.glob(osp.join(tmp_path, "out", "pred", "*.png"))]
    assert (written == expected[0].numpy()).all() and (out["predictions"] == written).all()
