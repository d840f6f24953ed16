"""Tiny twins of the recipe configs: a recipe's data, test/--tta pipelines and evaluator with the
tiny HamHead model of tiny_ham.py, for end-to-end runs of tools/*.py on a CPU in seconds."""

from __future__ import annotations

import os
import os.path as osp
from typing import Any, Optional

import numpy as np
import torch
from mmengine.config import Config

from tests.conftest import REPO

TINY_HAM = osp.join(REPO, "tests", "data", "tiny_ham.py")


def tiny_model(num_classes: int, head: Optional[dict] = None, **model: Any) -> dict:
    """tiny_ham.py's model with ``num_classes`` classes; ``head`` / ``model`` keys replaced."""
    cfg = Config.fromfile(TINY_HAM).model.to_dict()
    cfg["decode_head"].update(num_classes=num_classes, **(head or {}))
    cfg.update(model)
    return cfg


def write_tiny_twin(recipe: str, path: str, model: dict, **keys: Any) -> str:
    """Write a config inheriting ``configs/<recipe>`` whose model is ``model`` (replaced whole).

    Args:
        recipe: Config path relative to configs/, e.g. 'ham_voc_test.py'.
        path: Where to write the config.
        model: The model config (e.g. :func:`tiny_model`).
        **keys: More top-level keys, merged into the recipe's as mmengine merges a leaf's.

    Returns:
        ``path``.
    """
    lines = [
        f"_base_ = [{osp.join(REPO, 'configs', recipe)!r}]",
        f"model = {dict(_delete_=True, **model)!r}",
        "sync_bn = None",  # plain BN in the tiny model
        "test_dataloader = dict(num_workers=0, persistent_workers=False)",
        "vis_backends = [dict(type='LocalVisBackend')]",
        "visualizer = dict(type='SegLocalVisualizer', vis_backends=vis_backends, name='vis')",
    ]
    lines += [f"{key} = {value!r}" for key, value in keys.items()]
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


def save_checkpoint(config: str, path: str, seed: int = 0) -> str:
    """Build the config's model with initialised weights and save it as an mmengine checkpoint."""
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS

    init_default_scope("mmseg")
    torch.manual_seed(seed)
    model = MODELS.build(Config.fromfile(config).model)
    model.init_weights()
    torch.save(dict(state_dict=model.state_dict(), meta=dict()), path)
    return path


def write_split(
    root: str,
    images: dict[str, np.ndarray],
    ann_file: str,
    labels: Optional[dict[str, np.ndarray]] = None,
    seg_dir: str = "SegmentationClass",
) -> str:
    """A VOC-layout split: ``root/JPEGImages/<id>.jpg`` (BGR arrays), optional label PNGs in
    ``root/<seg_dir>/``, and the list ``root/<ann_file>`` of the ids of ``labels`` if given,
    else of ``images`` (so extra images can be left unlisted). Returns ``root``."""
    import cv2

    os.makedirs(osp.join(root, "JPEGImages"), exist_ok=True)
    os.makedirs(osp.dirname(osp.join(root, ann_file)), exist_ok=True)
    for image_id, image in images.items():
        cv2.imwrite(osp.join(root, "JPEGImages", f"{image_id}.jpg"), image)
    for image_id, label in (labels or {}).items():
        os.makedirs(osp.join(root, seg_dir), exist_ok=True)
        cv2.imwrite(osp.join(root, seg_dir, f"{image_id}.png"), label)
    with open(osp.join(root, ann_file), "w") as handle:
        handle.write("\n".join(labels or images) + "\n")
    return root
