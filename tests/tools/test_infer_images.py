"""tools/lib/images.py (tools/infer.py): overlays with a legend, folders and lists."""

from __future__ import annotations

import os
import os.path as osp

import cv2
import numpy as np
import pytest

from hamseg.datasets.context_shapes import PALETTE
from tests.apis.test_inference import ckpt, images, model  # noqa: F401  (fixtures)
from tests.helpers import one_thread  # noqa: F401  (fixture)
from tools.lib.images import collect_inputs, draw_overlay, output_name, segment_images


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


def test_single_odd_image_overlay_matches_label(model, images, tmp_path):  # noqa: F811
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


def test_folder_and_list(model, images, tmp_path, capsys):  # noqa: F811
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
