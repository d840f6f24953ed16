"""hamseg.apis inference: a model from a checkpoint alone; images of every kind read as RGB
(the fixtures here also serve tools/lib/images.py's tests, tests/tools/test_infer_images.py)."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest

from hamseg.apis import init_model
from hamseg.datasets.loading import read_image_rgb
from tests.helpers import make_checkpoint, one_thread  # noqa: F401  (fixture)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> str:
    return make_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "demo.pth"))


@pytest.fixture(scope="module")
def model(ckpt, one_thread):  # noqa: F811
    return init_model(None, ckpt, device="cpu")


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> dict[str, str]:
    """Odd-sized RGB, grayscale, RGBA and 16-bit images in a nested folder."""
    root = tmp_path_factory.mktemp("imgs")
    os.makedirs(root / "sub")
    rng = np.random.default_rng(0)
    paths = {
        "rgb": str(root / "odd_rgb.png"),
        "gray": str(root / "gray.png"),
        "rgba": str(root / "sub" / "rgba.png"),
        "u16": str(root / "sub" / "deep.png"),
        "jpg": str(root / "photo.jpg"),
    }
    cv2.imwrite(paths["rgb"], rng.integers(0, 256, (37, 53, 3), dtype=np.uint8))
    cv2.imwrite(paths["gray"], rng.integers(0, 256, (41, 29), dtype=np.uint8))
    rgba = rng.integers(0, 256, (30, 31, 4), dtype=np.uint8)
    rgba[:10, :, 3] = 0  # transparent band -> white after compositing
    cv2.imwrite(paths["rgba"], rgba)
    cv2.imwrite(paths["u16"], rng.integers(0, 65536, (25, 27), dtype=np.uint16))
    cv2.imwrite(paths["jpg"], rng.integers(0, 256, (19, 23, 3), dtype=np.uint8))
    return paths


def test_read_image_rgb_converts_every_kind(images):
    for key, shape in (
        ("rgb", (37, 53)),
        ("gray", (41, 29)),
        ("rgba", (30, 31)),
        ("u16", (25, 27)),
    ):
        img = read_image_rgb(images[key])
        assert img.dtype == np.uint8 and img.shape == (*shape, 3), key
    gray = read_image_rgb(images["gray"])
    assert np.array_equal(gray[..., 0], gray[..., 2])
    rgba = read_image_rgb(images["rgba"])
    assert (rgba[:10] == 255).all()  # alpha 0 composited over white
    rgb = read_image_rgb(images["rgb"])
    assert np.array_equal(rgb, cv2.imread(images["rgb"])[:, :, ::-1])  # RGB order, exact


def test_init_model_takes_config_and_classes_from_the_checkpoint(model):
    assert model.decode_head.num_classes == 7 and not model.training
    assert model.dataset_meta["classes"][1] == "red team"
    assert model.cfg.model.decode_head.type == "HamHead"
