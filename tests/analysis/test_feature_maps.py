"""tools.lab.analysis.features (feature maps) and tools/analysis/feature_maps.py (paper Fig. 6)."""

from __future__ import annotations

import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch

from hamseg.apis import init_model
from hamseg.apis.inference import predict_label
from hamseg.datasets.loading import read_image_rgb
from hamseg.utils.errors import UsageError
from tests.conftest import REPO
from tests.helpers import one_thread  # noqa: F401  (fixture)
from tools.lab.analysis.features import capture_features, pca_rgb, pick_channels, select_channels
from tools.lib.images import collect_inputs


def test_capture_features_hooks_the_hamburger(setup, one_thread):  # noqa: F811
    ckpt, images, _ = setup
    model = init_model(None, ckpt, device="cpu")
    paths = collect_inputs([images])
    rows = list(capture_features(model, "decode_head.hamburger", paths, progress=False))
    assert [r[0] for r in rows] == paths
    path, img, z, y, pred = rows[0]
    assert z.shape == y.shape == (128, 8, 8)  # 64 px at output stride 8
    with torch.no_grad():
        expected = model.decode_head.hamburger(z[None])[0]
    torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)  # Y = Hamburger(Z)
    assert np.array_equal(pred, predict_label(model, read_image_rgb(path)))
    assert not model.decode_head.hamburger._forward_hooks  # the hook is removed
    with pytest.raises(UsageError, match=r"channels \[999\] out of range 0..127"):
        select_channels(rows, [999], 3)
    assert select_channels(rows, [5, 1], 3) == [5, 1]
    assert select_channels(rows, None, 2) == pick_channels([(r[2], r[3]) for r in rows], 2)


def test_cli_png(setup):
    ckpt, images, root = setup
    out = str(root / "fm" / "fm.png")
    cmd = [sys.executable, "tools/analysis/feature_maps.py", images, "--checkpoint", ckpt]
    cmd += ["--out", out, "--max-images", "2", "--num-channels", "2", "--no-progress"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    img = cv2.imread(out)
    assert img is not None and img.shape[1] > img.shape[0]  # 2 rows x 8 columns
    lines = proc.stdout.strip().splitlines()  # after mmengine's "Loads checkpoint ..." log line
    assert lines[-2].startswith("channels shown: [") and lines[-1] == f"wrote {out}"


def test_pick_channels_ranks_by_change():
    z = torch.ones(4, 3, 3)
    y = z.clone()
    y[2] += 5.0
    y[0] += 1.0
    assert pick_channels([(z, y)], 2) == [2, 0]


def test_pca_rgb_range():
    feat = torch.randn(8, 5, 6)
    rgb = pca_rgb(feat)
    assert rgb.shape == (5, 6, 3) and rgb.min() >= 0 and rgb.max() <= 1
    assert np.allclose(pca_rgb(torch.zeros(4, 2, 2)), 0)
