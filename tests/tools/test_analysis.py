"""tools/analysis: spectrum (Fig. 5) and feature maps (Fig. 6) from a tiny checkpoint."""

from __future__ import annotations

import json
import os

import cv2
import numpy as np
import pytest
import torch

from hamseg.datasets.context_shapes import ContextShapesConfig, generate_context_shapes
from tests.helpers import load_tool, one_thread  # noqa: F401  (fixture)
from tests.tools.demo_helpers import DEMO_FCN, make_checkpoint

spectrum = load_tool("analysis/spectrum.py")
feature_maps = load_tool("analysis/feature_maps.py")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("analysis")
    ckpt = make_checkpoint(str(root / "ham.pth"))
    data = str(root / "cs")
    generate_context_shapes(data, ContextShapesConfig(size=64, num_train=1, num_val=4), False)
    return ckpt, os.path.join(data, "img_dir", "val"), root


def test_cumulative_energy_known_spectra():
    rank1 = torch.outer(torch.arange(1.0, 9.0), torch.ones(12)).reshape(8, 3, 4)
    r = spectrum.cumulative_energy(rank1, 5)
    assert r.shape == (5,) and np.allclose(r, 1.0)
    diag = torch.diag(torch.tensor([3.0, 2.0, 1.0])).reshape(3, 3, 1)  # s^2 = 9, 4, 1
    assert np.allclose(spectrum.cumulative_energy(diag, 4), [9 / 14, 13 / 14, 1.0, 1.0])


def test_spectrum_png_and_json(setup, one_thread):  # noqa: F811
    ckpt, images, root = setup
    out = str(root / "spec.png")
    assert (
        spectrum.main(
            [images, "--checkpoint", ckpt, "--out", out, "--max-rank", "16", "--no-progress"]
        )
        == 0
    )
    img = cv2.imread(out)
    assert img is not None and img.shape[0] > 200 and img.shape[1] > 300
    with open(str(root / "spec.json")) as f:
        info = json.load(f)
    assert info["num_images"] == 4 and len(info["before_mean"]) == 16
    for key in ("before_mean", "after_mean"):
        curve = np.array(info[key])
        assert np.all(np.diff(curve) >= -1e-9) and 0 < curve[0] <= curve[-1] <= 1 + 1e-9


def test_feature_maps_png(setup, one_thread):  # noqa: F811
    ckpt, images, root = setup
    out = str(root / "fm.png")
    assert (
        feature_maps.main(
            [
                images,
                "--checkpoint",
                ckpt,
                "--out",
                out,
                "--max-images",
                "2",
                "--num-channels",
                "2",
                "--no-progress",
            ]
        )
        == 0
    )
    img = cv2.imread(out)
    assert img is not None and img.shape[1] > img.shape[0]  # 2 rows x 8 columns
    assert (
        feature_maps.main(
            [images, "--checkpoint", ckpt, "--out", out, "--channels", "999", "--no-progress"]
        )
        == 2
    )


def test_pick_channels_ranks_by_change():
    z = torch.ones(4, 3, 3)
    y = z.clone()
    y[2] += 5.0
    y[0] += 1.0
    assert feature_maps.pick_channels([(z, y)], 2) == [2, 0]


def test_pca_rgb_range():
    feat = torch.randn(8, 5, 6)
    rgb = feature_maps.pca_rgb(feat)
    assert rgb.shape == (5, 6, 3) and rgb.min() >= 0 and rgb.max() <= 1
    assert np.allclose(feature_maps.pca_rgb(torch.zeros(4, 2, 2)), 0)


def test_no_hamburger_is_a_clear_error(setup, tmp_path):
    _, images, _ = setup
    ckpt = make_checkpoint(str(tmp_path / "fcn.pth"), DEMO_FCN)
    with pytest.raises(ValueError, match="no module 'decode_head.hamburger'"):
        spectrum.main([images, "--checkpoint", ckpt, "--out", str(tmp_path / "x.png")])
