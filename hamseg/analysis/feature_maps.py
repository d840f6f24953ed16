"""Feature maps before and after the Hamburger (paper Sec. 4 / App., Fig. 6).

One row per image: the image, the prediction, the first three principal components of the
features before (Z) and after (Y) the Hamburger shown as RGB, then a few channels before/after
on a shared colour scale per channel. By default the channels are those the Hamburger changes
most (largest mean |Y - Z| relative to |Z|, over the images).
"""

from __future__ import annotations

import os
import os.path as osp
from collections.abc import Sequence
from typing import Optional

import numpy as np
from torch import Tensor

from hamseg.apis.overlay import draw_overlay
from hamseg.utils.errors import UsageError

__all__ = ["FeatureRow", "draw_feature_maps", "pca_rgb", "pick_channels", "select_channels"]

#: What :func:`hamseg.analysis.features.capture_features` yields: path, RGB image, Z, Y, labels.
FeatureRow = tuple[str, np.ndarray, Tensor, Tensor, np.ndarray]


def pca_rgb(feat: Tensor) -> np.ndarray:
    """Project (C, H, W) features on their first three principal components, scaled to [0, 1]."""
    c, h, w = feat.shape
    x = feat.reshape(c, -1).double().numpy().T  # (HW, C)
    x = x - x.mean(0, keepdims=True)
    if not np.any(x):
        return np.zeros((h, w, 3))
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    k = min(3, vt.shape[0])
    proj = x @ vt[:k].T  # (HW, C) @ (C, k) -> (HW, k)
    if k < 3:
        proj = np.concatenate([proj, np.zeros((proj.shape[0], 3 - k))], 1)
    lo, hi = proj.min(0, keepdims=True), proj.max(0, keepdims=True)
    proj = (proj - lo) / np.where(hi - lo > 0, hi - lo, 1.0)
    return proj.reshape(h, w, 3)


def pick_channels(pairs: list[tuple[Tensor, Tensor]], k: int) -> list[int]:
    """The ``k`` channels with the largest mean relative change |Y - Z| / (|Z| + eps)."""
    score = None
    for z, y in pairs:
        change = (y - z).abs().flatten(1).mean(1) / (z.abs().flatten(1).mean(1) + 1e-6)
        score = change if score is None else score + change
    return [int(i) for i in score.argsort(descending=True)[:k]]


def select_channels(
    rows: Sequence[FeatureRow], channels: Optional[Sequence[int]], num_channels: int
) -> list[int]:
    """``channels`` if given (checked against the feature width), else :func:`pick_channels`.

    Raises:
        UsageError: If a given channel is out of range.
    """
    if not channels:
        return pick_channels([(z, y) for _, _, z, y, _ in rows], num_channels)
    num_c = rows[0][2].shape[0]
    bad = [c for c in channels if not 0 <= c < num_c]
    if bad:
        raise UsageError(f"channels {bad} out of range 0..{num_c - 1}")
    return list(channels)


def draw_feature_maps(
    rows: Sequence[FeatureRow],
    channels: Sequence[int],
    classes: Sequence[str],
    palette: Sequence[Sequence[int]],
    out: str,
    title: str,
) -> None:
    """Draw the figure (one row per image) into the PNG ``out`` (folders are created)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ncols = 4 + 2 * len(channels)
    fig, axes = plt.subplots(
        len(rows), ncols, figsize=(1.6 * ncols, 1.7 * len(rows) + 0.4), dpi=110, squeeze=False
    )
    for r, (path, img, z, y, pred) in enumerate(rows):
        overlay = draw_overlay(img, pred, classes, palette, legend="present")[: img.shape[0]]
        panels = [(img, osp.basename(path)), (overlay, "prediction + legend")]
        panels += [(pca_rgb(z), "Z: PCA as RGB"), (pca_rgb(y), "Y: PCA as RGB")]
        for i, (pic, name) in enumerate(panels):
            axes[r, i].imshow(pic, interpolation="nearest")
            axes[r, i].set_title(name, fontsize=7)
        for j, c in enumerate(channels):
            lo = float(min(z[c].min(), y[c].min()))
            hi = float(max(z[c].max(), y[c].max()))
            for k, (feat, tag) in enumerate(((z, "Z"), (y, "Y"))):
                ax = axes[r, 4 + 2 * j + k]
                ax.imshow(
                    feat[c].numpy(), cmap="viridis", vmin=lo, vmax=hi, interpolation="nearest"
                )
                ax.set_title(f"{tag} ch {c}", fontsize=7)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
