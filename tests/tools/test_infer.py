"""tools/infer.py: overlays with a legend for odd sizes, grayscale, RGBA, 16-bit, folders, lists."""

from __future__ import annotations

import os
import os.path as osp

import cv2
import numpy as np
import pytest

from hamseg.datasets.context_shapes import PALETTE
from tests.helpers import load_tool, one_thread  # noqa: F401  (fixture)
from tests.tools.demo_helpers import make_checkpoint

infer = load_tool("infer.py")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> str:
    return make_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "demo.pth"))


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
        img = infer.read_image_rgb(images[key])
        assert img.dtype == np.uint8 and img.shape == (*shape, 3), key
    gray = infer.read_image_rgb(images["gray"])
    assert np.array_equal(gray[..., 0], gray[..., 2])
    rgba = infer.read_image_rgb(images["rgba"])
    assert (rgba[:10] == 255).all()  # alpha 0 composited over white


def test_draw_overlay_exact_colours_and_legend():
    img = np.zeros((20, 30, 3), np.uint8)
    label = np.zeros((20, 30), np.int64)
    label[:, 20:] = 2
    label[0, 0] = 99  # outside the palette: left unpainted
    classes = ["bg", "a", "b"]
    palette = [[10, 20, 30], [200, 0, 0], [0, 0, 250]]
    out = infer.draw_overlay(img, label, classes, palette, opacity=1.0, legend="present")
    assert out.shape[1] > 30 and out.shape[0] >= 20
    assert (out[5, 25] == [0, 0, 250]).all() and (out[5, 5] == [10, 20, 30]).all()
    assert (out[0, 0] == 0).all()
    panel = out[:, 30:].reshape(-1, 3)
    has = lambda c: (panel == c).all(1).any()  # noqa: E731
    assert has([0, 0, 250]) and has([10, 20, 30]) and not has([200, 0, 0])  # only present ones
    full = infer.draw_overlay(img, label, classes, palette, legend="all")
    assert (full[:, 30:].reshape(-1, 3) == [200, 0, 0]).all(1).any()


def test_cli_single_odd_image_overlay_matches_label(ckpt, images, tmp_path, one_thread):  # noqa: F811
    out = str(tmp_path / "out")
    rc = infer.main(
        [
            images["rgb"],
            "--checkpoint",
            ckpt,
            "--out-dir",
            out,
            "--opacity",
            "1",
            "--save-label",
            "--no-progress",
        ]
    )
    assert rc == 0
    overlay = cv2.imread(osp.join(out, "odd_rgb_overlay.png"))[:, :, ::-1]
    label = cv2.imread(osp.join(out, "odd_rgb_label.png"), cv2.IMREAD_UNCHANGED)
    assert label.shape == (37, 53)
    assert overlay.shape[0] >= 37 and overlay.shape[1] > 53
    assert np.array_equal(overlay[:37, :53], np.asarray(PALETTE, np.uint8)[label])


def test_cli_folder_and_list(ckpt, images, tmp_path, one_thread, capsys):  # noqa: F811
    folder = osp.dirname(images["rgb"])
    out = str(tmp_path / "folder")
    assert infer.main([folder, "--checkpoint", ckpt, "--out-dir", out]) == 0
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
    out2 = str(tmp_path / "list")
    assert infer.main([str(lst), "--checkpoint", ckpt, "--out-dir", out2, "--no-progress"]) == 0
    assert sorted(os.listdir(out2)) == ["gray_overlay.png", "rgba_overlay.png"]


def test_cli_missing_input_raises(ckpt, tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.png"):
        infer.main([str(tmp_path / "nope.png"), "--checkpoint", ckpt])
