"""hamseg.apis inference: images of every kind, overlays with a legend, folders and lists."""

from __future__ import annotations

import os
import os.path as osp

import cv2
import numpy as np
import pytest

from hamseg.apis import init_model
from hamseg.apis.images import (
    collect_inputs,
    draw_overlay,
    output_name,
    read_image_rgb,
    segment_images,
)
from hamseg.datasets.context_shapes import PALETTE
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


def test_draw_overlay_exact_colours_and_legend():
    img = np.zeros((20, 30, 3), np.uint8)
    label = np.zeros((20, 30), np.int64)
    label[:, 20:] = 2
    label[0, 0] = 99  # outside the palette: left unpainted
    classes = ["bg", "a", "b"]
    palette = [[10, 20, 30], [200, 0, 0], [0, 0, 250]]
    out = draw_overlay(img, label, classes, palette, opacity=1.0, legend="present")
    assert out.shape[1] > 30 and out.shape[0] >= 20
    assert (out[5, 25] == [0, 0, 250]).all() and (out[5, 5] == [10, 20, 30]).all()
    assert (out[0, 0] == 0).all()
    panel = out[:, 30:].reshape(-1, 3)
    has = lambda c: (panel == c).all(1).any()  # noqa: E731
    assert has([0, 0, 250]) and has([10, 20, 30]) and not has([200, 0, 0])  # only present ones
    full = draw_overlay(img, label, classes, palette, legend="all")
    assert (full[:, 30:].reshape(-1, 3) == [200, 0, 0]).all(1).any()


def test_init_model_takes_config_and_classes_from_the_checkpoint(model):
    assert model.decode_head.num_classes == 7 and not model.training
    assert model.dataset_meta["classes"][1] == "red team"
    assert model.cfg.model.decode_head.type == "HamHead"


def test_single_odd_image_overlay_matches_label(model, images, tmp_path):
    out = str(tmp_path / "out")
    report = segment_images(
        model, [images["rgb"]], out, opacity=1.0, save_label=True, progress=False
    )
    assert report.written == [osp.join(out, "odd_rgb_overlay.png")] and report.failed == []
    overlay = cv2.imread(osp.join(out, "odd_rgb_overlay.png"))[:, :, ::-1]
    label = cv2.imread(osp.join(out, "odd_rgb_label.png"), cv2.IMREAD_UNCHANGED)
    assert label.shape == (37, 53)
    assert overlay.shape[0] >= 37 and overlay.shape[1] > 53
    assert np.array_equal(overlay[:37, :53], np.asarray(PALETTE, np.uint8)[label])


def test_folder_and_list(model, images, tmp_path, capsys):
    folder = osp.dirname(images["rgb"])
    out = str(tmp_path / "folder")
    paths = collect_inputs([folder])
    report = segment_images(model, paths, out, inputs_root=folder)
    assert len(report.written) == 5 and not report.failed
    names = sorted(os.listdir(out))
    assert names == sorted(
        [
            "gray_overlay.png",
            "odd_rgb_overlay.png",
            "photo_overlay.png",
            "sub__deep_overlay.png",
            "sub__rgba_overlay.png",
        ]
    )
    for n in names:
        assert cv2.imread(osp.join(out, n)) is not None
    assert "infer" in capsys.readouterr().err  # the tqdm bar
    lst = tmp_path / "list.txt"
    lst.write_text(f"{images['gray']}\n# comment\n{images['rgba']}\n")
    assert collect_inputs([str(lst)]) == [images["gray"], images["rgba"]]
    out2 = str(tmp_path / "list")
    segment_images(model, collect_inputs([str(lst)]), out2, progress=False)
    assert sorted(os.listdir(out2)) == ["gray_overlay.png", "rgba_overlay.png"]


def test_output_name_keeps_subfolders():
    assert output_name(osp.join("in", "sub", "a.b.png"), "in") == "sub__a.b"
    assert output_name(osp.join("in", "sub", "a.png"), None) == "a"


def test_missing_input_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.png"):
        collect_inputs([str(tmp_path / "nope.png")])
    lst = tmp_path / "l.txt"
    lst.write_text("gone.png\n")
    with pytest.raises(FileNotFoundError, match=r"listed in .*l.txt not found: gone.png"):
        collect_inputs([str(lst)])
