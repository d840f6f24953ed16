"""Helpers for the demo-tool tests: an untrained demo checkpoint in mmengine's format."""

from __future__ import annotations

import os.path as osp

import torch

import hamseg  # noqa: F401  (must precede mmseg imports)
from hamseg.datasets.context_shapes import CLASSES, PALETTE
from tests.conftest import REPO

DEMO_NMF = osp.join(REPO, "configs", "demo", "hamhead-nmf_r18-d8_context-shapes.py")
DEMO_FCN = osp.join(REPO, "configs", "demo", "fcn_r18-d8_context-shapes.py")


def make_checkpoint(path: str, config: str = DEMO_NMF, seed: int = 0) -> str:
    """Save a freshly initialised demo model as mmengine does (state_dict + meta.cfg/dataset_meta).

    Runs the model once in training mode on a random batch so that the BatchNorm statistics are
    not the trivial initial ones.
    """
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS

    init_default_scope("mmseg")
    torch.manual_seed(seed)
    cfg = Config.fromfile(config)
    model = MODELS.build(cfg.model)
    model.init_weights()
    model.train()
    with torch.no_grad():
        model.decode_head(model.backbone(torch.rand(2, 3, 64, 64)))
    meta = dict(cfg=cfg.pretty_text, dataset_meta=dict(classes=CLASSES, palette=PALETTE))
    torch.save(dict(meta=meta, state_dict=model.state_dict()), path)
    return path
