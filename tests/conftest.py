"""Shared fixtures: a tiny on-disk segmentation dataset in mmseg's folder layout."""

from __future__ import annotations

import os
import os.path as osp

import numpy as np
import pytest

import hamseg  # noqa: F401  (must precede mmseg imports in test modules)

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
TINY_FCN = osp.join(REPO, "tests", "data", "tiny_fcn.py")


def write_tiny_dataset(root: str, n_train: int = 6, n_val: int = 2, seed: int = 0) -> str:
    """Write RGB images (odd sizes) and 3-class PNG labels: class = colour of a square."""
    import cv2

    rng = np.random.default_rng(seed)
    colours = np.array([[0, 0, 0], [0, 0, 255], [0, 255, 0]], np.uint8)  # BGR per class
    for split, count in (("train", n_train), ("val", n_val)):
        os.makedirs(osp.join(root, "img_dir", split), exist_ok=True)
        os.makedirs(osp.join(root, "ann_dir", split), exist_ok=True)
        for i in range(count):
            h, w = 33 + 2 * (i % 3), 37
            label = np.zeros((h, w), np.uint8)
            for cls in (1, 2):
                y, x = rng.integers(0, h - 10), rng.integers(0, w - 10)
                label[y : y + 10, x : x + 10] = cls
            image = colours[label] + rng.integers(0, 30, (h, w, 3), dtype=np.uint8)
            cv2.imwrite(osp.join(root, "img_dir", split, f"{i:03d}.jpg"), image)
            cv2.imwrite(osp.join(root, "ann_dir", split, f"{i:03d}.png"), label)
    return root


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> str:
    """Root of a tiny 3-class dataset (6 train, 2 val images)."""
    return write_tiny_dataset(str(tmp_path_factory.mktemp("tiny_data")))


@pytest.fixture(scope="session")
def trained_demo(tmp_path_factory) -> tuple[str, str]:
    """``(checkpoint, data root)`` of the demo HamHead-NMF trained as ``tools/run_demo.py``
    trains it (the default config, data and 500 iterations; about 70 s on 2 cores). For slow
    tests that need a model which uses global context."""
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("trained_demo")
    data, work = str(root / "context_shapes"), str(root / "work")
    cmd = [sys.executable, "tools/run_demo.py", "--data-root", data, "--work-dir", work]
    proc = subprocess.run(cmd + ["--no-vis"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return osp.join(work, "iter_500.pth"), data


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked ``gpu`` are skipped, with the reason, where CUDA is not available."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="CUDA is not available (gpu test; run tools/gpu_check.sh)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
