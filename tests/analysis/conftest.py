"""A tiny HamHead checkpoint and four Context Shapes validation images for the analysis tests."""

from __future__ import annotations

import os.path as osp

import pytest

from hamseg.datasets.context_shapes import ContextShapesConfig, generate_context_shapes
from tests.helpers import make_checkpoint


@pytest.fixture(scope="session")
def setup(tmp_path_factory):
    """``(checkpoint, folder of 4 images of 64 x 64, scratch folder)``."""
    root = tmp_path_factory.mktemp("analysis")
    ckpt = make_checkpoint(str(root / "ham.pth"))
    data = str(root / "cs")
    generate_context_shapes(data, ContextShapesConfig(size=64, num_train=1, num_val=4), False)
    return ckpt, osp.join(data, "img_dir", "val"), root
