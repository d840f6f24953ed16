"""Spectrum of the features before and after the Hamburger (paper Sec. 4 / App., Fig. 5).

For every image the input Z and the output Y of the Hamburger block are unfolded to C x HW
matrices; the curve is the accumulative ratio of the squared largest r singular values over all
squared singular values, r = 1 .. max_rank, averaged over the images (shaded: one standard
deviation). A curve that rises faster means energy concentrated in fewer directions, the low-rank
effect the paper reports for Hamburger.
"""

from __future__ import annotations

import json
import os
import os.path as osp
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from .features import capture_features

__all__ = ["compute_spectra", "cumulative_energy", "plot_spectrum", "write_spectrum"]


def cumulative_energy(feat: Tensor, max_rank: int) -> np.ndarray:
    """Accumulative ratio sum_{i<=r} s_i^2 / sum_i s_i^2 of the C x HW unfolding, r = 1..max_rank.

    Args:
        feat: Features (C, H, W).
        max_rank: Largest r reported; ranks beyond min(C, HW) repeat 1.0.
    """
    mat = feat.reshape(feat.shape[0], -1).double()  # (C, HW)
    s2 = torch.linalg.svdvals(mat).pow(2)
    total = s2.sum().clamp_min(1e-12)
    ratio = (s2.cumsum(0) / total).numpy()
    out = np.ones(max_rank)
    n = min(max_rank, len(ratio))
    out[:n] = ratio[:n]
    return out


def compute_spectra(
    model: nn.Module, module_name: str, paths: Sequence[str], max_rank: int, progress: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Curves of Z and Y for each image: ``(before, after)``, each (num images, max_rank)."""
    before, after = [], []
    for _, _, z, y, _ in capture_features(model, module_name, paths, progress):
        before.append(cumulative_energy(z, max_rank))
        after.append(cumulative_energy(y, max_rank))
    return np.stack(before), np.stack(after)


def plot_spectrum(before: np.ndarray, after: np.ndarray, out: str, title: str) -> None:
    """Plot mean +- std of the curves (rows = images) before and after."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = np.arange(1, before.shape[1] + 1)
    fig, ax = plt.subplots(figsize=(5.5, 4), dpi=120)
    for curves, name, colour in (
        (before, "before Hamburger (Z)", "tab:blue"),
        (after, "after Hamburger (Y)", "tab:red"),
    ):
        mean, std = curves.mean(0), curves.std(0)
        ax.plot(r, mean, color=colour, label=name, lw=2)
        ax.fill_between(
            r, np.clip(mean - std, 0, 1), np.clip(mean + std, 0, 1), color=colour, alpha=0.2, lw=0
        )
    ax.set_xlabel("r (number of largest singular values)")
    ax.set_ylabel("accumulative ratio of squared singular values")
    ax.set_ylim(0, 1.02)
    ax.set_xlim(1, r[-1])
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def write_spectrum(
    before: np.ndarray, after: np.ndarray, out: str, title: str, info: dict[str, Any]
) -> str:
    """Write the plot to ``out`` and the curves (mean and std per r) to a JSON beside it.

    Args:
        before, after: From :func:`compute_spectra`.
        out: PNG path (folders are created).
        title: Plot title.
        info: Extra JSON fields (e.g. checkpoint, module).

    Returns:
        The JSON path.
    """
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    plot_spectrum(before, after, out, title)
    summary = dict(
        **info,
        num_images=len(before),
        rank=list(range(1, before.shape[1] + 1)),
        before_mean=before.mean(0).round(5).tolist(),
        before_std=before.std(0).round(5).tolist(),
        after_mean=after.mean(0).round(5).tolist(),
        after_std=after.std(0).round(5).tolist(),
    )
    path = osp.splitext(out)[0] + ".json"
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    return path
