"""The spectrum (paper Fig. 5) and feature maps (Fig. 6) of a HamHead model's Hamburger."""

import json

import cv2
import numpy as np
import pytest
import torch

from hamseg.apis import init_model
from hamseg.utils.errors import UsageError
from projects.context_lab.context_lab import features as Fe

CONFIG = "configs/demo/hamhead-nmf_r18-d8_context-shapes.py"


def test_cumulative_energy_of_known_spectra():
    rank1 = torch.outer(torch.arange(1.0, 9.0), torch.ones(12)).reshape(8, 3, 4)
    assert np.allclose(Fe.cumulative_energy(rank1, 5), 1.0)
    diag = torch.diag(torch.tensor([3.0, 2.0, 1.0])).reshape(3, 3, 1)  # s^2 = 9, 4, 1
    assert np.allclose(Fe.cumulative_energy(diag, 4), [9 / 14, 13 / 14, 1.0, 1.0])


def test_pca_rgb_and_pick_channels():
    feat = torch.randn(5, 6, 7)
    rgb = Fe.pca_rgb(feat)
    assert rgb.shape == (6, 7, 3) and rgb.min() == 0.0 and rgb.max() == 1.0
    z = torch.ones(4, 3, 3)
    y = z.clone()
    y[2] += 5.0
    y[0] += 1.0
    assert Fe.pick_channels([(z, y)], 2) == [2, 0]


def test_both_analyses_from_the_command_line(tmp_path, capsys):
    torch.manual_seed(0)
    for i in range(2):
        cv2.imwrite(
            str(tmp_path / f"{i}.png"), np.random.default_rng(i).integers(0, 255, (40, 48, 3))
        )
    out = str(tmp_path / "spectrum.png")
    Fe.main(["spectrum", str(tmp_path), "--config", CONFIG, "--max-rank", "8", "--out", out])
    curves = json.loads((tmp_path / "spectrum.json").read_text())
    assert curves["num_images"] == 2 and len(curves["after_mean"]) == 8
    assert all(a <= b + 1e-9 for a, b in zip(curves["before_mean"], curves["before_mean"][1:]))
    Fe.main(
        [
            "maps",
            str(tmp_path / "0.png"),
            "--config",
            CONFIG,
            "--channels",
            "1",
            "2",
            "--out",
            str(tmp_path / "m.png"),
        ]
    )
    assert cv2.imread(str(tmp_path / "m.png")).shape[1] > 8 * 100
    assert "channels shown: [1, 2]" in capsys.readouterr().out
    model = init_model(CONFIG, None, "cpu")
    with pytest.raises(UsageError, match="decode_head.nope"):
        list(Fe.capture(model, "decode_head.nope", [str(tmp_path / "0.png")]))
