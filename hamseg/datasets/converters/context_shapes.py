"""A preview of generated Context Shapes: the first training images above their label maps.

The generator itself is :func:`hamseg.datasets.context_shapes.generate_context_shapes`;
``tools/dataset_converters/generate_context_shapes.py`` runs it and, with ``--preview``, this.
"""

from __future__ import annotations

import os
import os.path as osp

import cv2
import numpy as np

from hamseg.datasets.context_shapes import PALETTE

__all__ = ["write_preview"]


def write_preview(out_dir: str, path: str, count: int) -> None:
    """Montage: the first ``count`` training images above their label maps in class colours.

    Args:
        out_dir: Root of a generated dataset.
        path: Output PNG (folders are created).
        count: Images in the montage (fewer if the split has fewer).
    """
    palette = np.asarray(PALETTE, np.uint8)
    tops, bottoms = [], []
    for i in range(count):
        name = f"{i:06d}.png"
        img = cv2.imread(osp.join(out_dir, "img_dir", "train", name), cv2.IMREAD_COLOR)
        if img is None:
            break
        label = cv2.imread(osp.join(out_dir, "ann_dir", "train", name), cv2.IMREAD_UNCHANGED)
        gap = np.full((img.shape[0], 4, 3), 255, np.uint8)
        tops += [img, gap]
        bottoms += [np.ascontiguousarray(palette[label][:, :, ::-1]), gap]
    top, bottom = np.concatenate(tops[:-1], 1), np.concatenate(bottoms[:-1], 1)
    sep = np.full((4, top.shape[1], 3), 255, np.uint8)
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    cv2.imwrite(path, np.concatenate([top, sep, bottom], 0))
