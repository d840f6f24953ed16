"""tools.lab.analysis.features (spectrum) and tools/analysis/spectrum.py (paper Fig. 5) on a tiny
checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch
from tools.lab.analysis.features import (
    compute_spectra,
    cumulative_energy,
    get_module,
    write_spectrum,
)

from hamseg.apis import init_model
from tests.conftest import REPO
from tests.helpers import DEMO_FCN, make_checkpoint, one_thread  # noqa: F401  (fixture)
from tools.lib.images import collect_inputs


def test_cumulative_energy_known_spectra():
    rank1 = torch.outer(torch.arange(1.0, 9.0), torch.ones(12)).reshape(8, 3, 4)
    r = cumulative_energy(rank1, 5)
    assert r.shape == (5,) and np.allclose(r, 1.0)
    diag = torch.diag(torch.tensor([3.0, 2.0, 1.0])).reshape(3, 3, 1)  # s^2 = 9, 4, 1
    assert np.allclose(cumulative_energy(diag, 4), [9 / 14, 13 / 14, 1.0, 1.0])


def test_spectra_png_and_json(setup, one_thread):  # noqa: F811
    ckpt, images, root = setup
    model = init_model(None, ckpt, device="cpu")
    before, after = compute_spectra(
        model, "decode_head.hamburger", collect_inputs([images]), 16, progress=False
    )
    assert before.shape == after.shape == (4, 16)
    out = str(root / "spec.png")
    assert write_spectrum(before, after, out, "t", dict(module="m")) == str(root / "spec.json")
    img = cv2.imread(out)
    assert img is not None and img.shape[0] > 200 and img.shape[1] > 300
    with open(str(root / "spec.json")) as f:
        info = json.load(f)
    assert info["num_images"] == 4 and len(info["before_mean"]) == 16 and info["module"] == "m"
    assert np.allclose(info["after_mean"], after.mean(0).round(5))
    for key in ("before_mean", "after_mean"):
        curve = np.array(info[key])
        assert np.all(np.diff(curve) >= -1e-9) and 0 < curve[0] <= curve[-1] <= 1 + 1e-9


def test_cli_prints_the_curve_and_writes_png_and_json(setup):
    ckpt, images, root = setup
    out = str(root / "cli" / "spec.png")
    cmd = [sys.executable, "tools/analysis/spectrum.py", images, "--checkpoint", ckpt]
    cmd += ["--out", out, "--max-rank", "16", "--no-progress"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(str(root / "cli" / "spec.json")) as f:
        info = json.load(f)
    assert info["checkpoint"] == ckpt and info["module"] == "decode_head.hamburger"
    lines = proc.stdout.strip().splitlines()[-4:]  # after mmengine's "Loads checkpoint" log
    assert [line.split(":")[0] for line in lines[:3]] == ["r=  1", "r=  4", "r= 16"]
    assert f"after {info['after_mean'][3]:.3f}" in lines[1]
    assert lines[-1] == f"wrote {out}"


def test_no_hamburger_is_a_clear_error(setup, tmp_path):
    _, images, _ = setup
    ckpt = make_checkpoint(str(tmp_path / "fcn.pth"), DEMO_FCN)
    model = init_model(None, ckpt, device="cpu")
    with pytest.raises(ValueError, match="no module 'decode_head.hamburger'"):
        compute_spectra(model, "decode_head.hamburger", collect_inputs([images]), 4, False)
    assert get_module(model, "decode_head.conv_seg") is model.decode_head.conv_seg
