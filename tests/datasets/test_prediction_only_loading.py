"""The checked label loader in prediction-only paths: mmseg's ``inference_model`` and
``MMSegInferencer`` drop only ``LoadAnnotations`` from a config's test pipeline, so
``CheckedLoadAnnotations`` must let a sample without labels through (and still refuse a listed
label file that is missing)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

import hamseg  # noqa: F401  (before mmseg)
from hamseg.datasets.loading import CheckedLoadAnnotations, InvalidSampleError
from tests.helpers import (
    DEMO_NMF,
    make_checkpoint,
    one_thread,  # noqa: F401  (fixture)
)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_sample_without_labels_passes_a_listed_missing_one_does_not(tmp_path):
    load = CheckedLoadAnnotations(num_classes=3)
    sample = dict(img_path="x.jpg", seg_fields=[], reduce_zero_label=False)
    assert load(dict(sample)) == sample
    with pytest.raises(InvalidSampleError, match=r"nowhere\.png"):
        load(dict(sample, seg_map_path=str(tmp_path / "nowhere.png")))


def test_mmseg_inference_model_runs_on_a_config_with_checked_loaders(tmp_path):
    from mmseg.apis import inference_model, init_model

    ckpt = make_checkpoint(str(tmp_path / "demo.pth"))
    image = str(tmp_path / "image.png")
    cv2.imwrite(image, np.random.default_rng(0).integers(0, 255, (37, 45, 3), dtype=np.uint8))
    model = init_model(DEMO_NMF, ckpt, device="cpu")
    assert model.cfg.test_pipeline[1]["type"] == "CheckedLoadAnnotations"
    result = inference_model(model, image)
    labels = result.pred_sem_seg.data
    assert tuple(labels.shape) == (1, 37, 45) and 0 <= int(labels.min()) <= int(labels.max()) < 7
