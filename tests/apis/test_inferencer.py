"""hamseg.apis' ``MMSegInferencer`` (:class:`HamSegInferencer`, mmseg's subclassed) on hamseg's
configs (checked loaders), model names and packaged configs, giving inference_model's label maps."""

from __future__ import annotations

import glob
import os.path as osp

import cv2
import numpy as np
import pytest
from mmengine.config import Config
from mmseg.apis import MMSegInferencer

from hamseg.apis import HamSegInferencer, inference_model, init_model
from hamseg.apis.inference import resolve_model_name
from tests.helpers import (
    DEMO_NMF,
    make_checkpoint,
    one_thread,  # noqa: F401  (fixture)
)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_hamseg_names_resolve_in_its_index_and_others_fall_through_to_mmseg():
    config, weights = resolve_model_name("HamSeg-Demo")  # an alias, any case
    cfg = Config.fromfile(config)
    assert cfg.model.decode_head.type == "HamHead" and cfg.demo_name == "HamHead-NMF"
    assert weights == "work_dirs/demo/hamhead-nmf_r18-d8_context-shapes/iter_500.pth"
    assert resolve_model_name("fcn_r50-d8_4xb2-40k_cityscapes-512x1024") is None  # mmseg's


def test_mmsegs_own_inferencer_still_needs_the_subclass(tmp_path):
    """mmseg 1.2.2's MMSegInferencer finds the image loader by the name LoadImageFromFile and
    knows mmseg's index only: when this test fails, HamSegInferencer's overrides can go."""
    ckpt = make_checkpoint(str(tmp_path / "demo.pth"), seed=1)
    with pytest.raises(ValueError, match="LoadImageFromFile is not found in the test pipeline"):
        MMSegInferencer(DEMO_NMF, weights=ckpt, device="cpu")
    with pytest.raises(ValueError, match="Cannot find model"):
        MMSegInferencer("hamseg-demo", weights=ckpt, device="cpu")


def test_inferencer_gives_the_label_maps_of_inference_model(tmp_path):
    ckpt = make_checkpoint(str(tmp_path / "demo.pth"), seed=1)
    rng = np.random.default_rng(1)
    arrays = [rng.integers(0, 255, (h, w, 3), dtype=np.uint8) for h, w in ((37, 45), (29, 51))]
    path = str(tmp_path / "image.png")
    cv2.imwrite(path, arrays[1])
    model = init_model(DEMO_NMF, ckpt, device="cpu")
    expected = [inference_model(model, a).pred_sem_seg.data[0] for a in arrays]
    assert len(expected[0].unique()) > 1
    packaged = "hamseg::demo/hamhead-nmf_r18-d8_context-shapes.py"
    sources = (DEMO_NMF, "hamhead-nmf_r18-d8_context-shapes", packaged)
    for source in sources:  # a config path, a model name, a packaged config
        inferencer = HamSegInferencer(source, weights=ckpt, device="cpu")
        assert list(inferencer.model.dataset_meta["classes"]) == list(model.dataset_meta["classes"])
        got = inferencer([arrays[0], path], return_datasamples=True)  # an array and a file
        for sample, labels in zip(got, expected):
            assert bool((sample.pred_sem_seg.data[0] == labels).all()), source
    out = inferencer(arrays[0], out_dir=str(tmp_path / "out"))  # mmseg's own outputs
    (written,) = [cv2.imread(p, 0) for p in glob.glob(osp.join(tmp_path, "out", "pred", "*.png"))]
    assert (written == expected[0].numpy()).all() and (out["predictions"] == written).all()
