"""hamseg.apis: mmseg's init_model / inference_model / MMSegInferencer on hamseg's models."""

from __future__ import annotations

import os.path as osp

import cv2
import numpy as np
import pytest

from hamseg.apis import HamSegInferencer, inference_model, init_model, resolve_model_name
from hamseg.apis.inference import predict_label
from tests.conftest import REPO
from tests.helpers import (
    DEMO_NMF,
    make_checkpoint,
    one_thread,  # noqa: F401  (fixture)
)
from tests.tools.test_finetune_path import CUSTOM, layout_options, run, write_mask_layout

pytestmark = pytest.mark.usefixtures("one_thread")


def test_model_names_and_aliases_resolve_to_hamseg_configs():
    config, weights = resolve_model_name("ham_voc")
    assert osp.realpath(config) == osp.join(
        REPO, "configs", "hamnet", "hamnet_r101-d8_8xb2-60k_voc12aug-513x513.py"
    )
    assert weights == "work_dirs/hamnet_r101-d8_8xb2-60k_voc12aug-513x513/iter_60000.pth"
    assert resolve_model_name("HamHead-NMF_R18-D8_Context-Shapes") is not None
    assert resolve_model_name("no-such-model") is None


def test_inferencer_by_name_equals_init_model_and_inference_model(tmp_path):
    ckpt = make_checkpoint(str(tmp_path / "demo.pth"))
    image = np.random.default_rng(0).integers(0, 255, (45, 53, 3), dtype=np.uint8)  # BGR
    inferencer = HamSegInferencer("hamhead-nmf_r18-d8_context-shapes", weights=ckpt, device="cpu")
    by_name = inferencer(image, return_datasamples=True).pred_sem_seg.data[0]  # one image
    model = init_model(DEMO_NMF, ckpt, device="cpu")
    direct = inference_model(model, image).pred_sem_seg.data[0]
    assert tuple(direct.shape) == (45, 53) and bool((by_name == direct).all())
    assert (
        list(model.dataset_meta["classes"])[:2]
        == list(inferencer.model.dataset_meta["classes"])[:2]
    )


def test_api_label_map_equals_tools_test_out(tmp_path):
    """hamseg.apis on one image gives the label map tools/test.py --out writes for it."""
    root = write_mask_layout(str(tmp_path / "data"))
    ckpt = make_checkpoint(str(tmp_path / "three.pth"), num_classes=3)
    out = str(tmp_path / "pred")
    opts = layout_options(root, 0) + ["model.decode_head.ham_cfg.eval_seed=0"]
    proc = run("tools/test.py", CUSTOM, ckpt, "--work-dir", str(tmp_path / "w"), "--out", out,
               "--cfg-options", *opts)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    model = init_model(CUSTOM, ckpt, device="cpu")
    model.decode_head.hamburger.ham.eval_seed = 0
    image = cv2.imread(osp.join(root, "images", "val", "001.jpg"))
    ours = predict_label(model, image[:, :, ::-1])
    written = cv2.imread(osp.join(out, "001.png"), cv2.IMREAD_UNCHANGED)
    assert written.shape == ours.shape and (written == ours).all()
