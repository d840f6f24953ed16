"""The paper's analyses of the features before (Z) and after (Y) the Hamburger (Sec. 4 / App.),
read by a forward hook: the singular-value spectrum of the C x HW unfoldings (Fig. 5) and the
feature maps (Fig. 6). docs/demo.md shows both on the demo."""

from __future__ import annotations

import json
import os
import os.path as osp
from collections.abc import Iterator, Sequence
from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor, nn

from hamseg.apis.inference import predict_label
from hamseg.datasets.loading import read_image_rgb
from hamseg.utils.errors import UsageError
from tools.lib.images import draw_overlay

#: The block both analyses look at in a HamHead model.
HAMBURGER = "decode_head.hamburger"
#: What :func:`capture_features` yields: path, RGB image, Z, Y (C, H, W), predicted labels.
FeatureRow = tuple[str, np.ndarray, Tensor, Tensor, np.ndarray]


class MissingModuleError(UsageError):
    """The model has no module of the requested name."""


def get_module(model: nn.Module, name: str) -> nn.Module:
    """The submodule ``name`` (dotted path) of ``model``, or :class:`MissingModuleError`
    listing the head's modules (e.g. an FCN checkpoint has no Hamburger)."""
    modules = dict(model.named_modules())
    if name not in modules:
        raise MissingModuleError(
            f"the model has no module {name!r} (is this a HamHead checkpoint?); pass --module "
            "with one of: " + ", ".join(n for n in modules if n.startswith("decode_head"))
        )
    return modules[name]


def capture_features(
    model: nn.Module, module_name: str, paths: Sequence[str], progress: bool = True
) -> Iterator[FeatureRow]:
    """Per image: the input Z and output Y of the module (first sample, float32 CPU) and the
    predicted label map, with the path and the RGB image."""
    from tqdm import tqdm

    store: dict[str, Tensor] = {}

    def hook(_m: nn.Module, inputs: tuple, output: Tensor) -> None:
        store.update(z=inputs[0].detach()[0].float().cpu(), y=output.detach()[0].float().cpu())

    handle = get_module(model, module_name).register_forward_hook(hook)
    try:
        for path in tqdm(paths, desc="features", unit="img", disable=not progress):
            img = read_image_rgb(path)
            pred = predict_label(model, img)  # the hook fills the store
            yield path, img, store["z"], store["y"], pred
    finally:
        handle.remove()


def cumulative_energy(feat: Tensor, max_rank: int) -> np.ndarray:
    """sum_{i<=r} s_i^2 / sum_i s_i^2 of the C x HW unfolding of (C, H, W) features,
    r = 1 .. max_rank (1.0 beyond min(C, HW))."""
    s2 = torch.linalg.svdvals(feat.reshape(feat.shape[0], -1).double()).pow(2)
    ratio = (s2.cumsum(0) / s2.sum().clamp_min(1e-12)).numpy()[:max_rank]
    return np.concatenate([ratio, np.ones(max_rank - len(ratio))])


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def compute_spectra(
    model: nn.Module, module_name: str, paths: Sequence[str], max_rank: int, progress: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """The curves of Z and Y: ``(before, after)``, each (num images, max_rank)."""
    curves = [
        (cumulative_energy(z, max_rank), cumulative_energy(y, max_rank))
        for _, _, z, y, _ in capture_features(model, module_name, paths, progress)
    ]
    return np.stack([b for b, _ in curves]), np.stack([a for _, a in curves])


def write_spectrum(
    before: np.ndarray, after: np.ndarray, out: str, title: str, info: dict[str, Any]
) -> str:
    """Plot mean +- std of the curves into the PNG ``out`` and write them, with ``info``, to a
    JSON beside it; returns the JSON's path."""
    plt = _pyplot()
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    r = np.arange(1, before.shape[1] + 1)
    fig, ax = plt.subplots(figsize=(5.5, 4), dpi=120)
    summary = dict(**info, num_images=len(before), rank=r.tolist())
    for curves, key, name, colour in (
        (before, "before", "before Hamburger (Z)", "tab:blue"),
        (after, "after", "after Hamburger (Y)", "tab:red"),
    ):
        mean = curves.mean(0)
        std = curves.std(0)
        ax.plot(r, mean, color=colour, label=name, lw=2)
        low = np.clip(mean - std, 0, 1)
        high = np.clip(mean + std, 0, 1)
        ax.fill_between(r, low, high, color=colour, alpha=0.2, lw=0)
        summary.update({f"{key}_mean": mean.round(5).tolist(), f"{key}_std": std.round(5).tolist()})
    ax.set(xlabel="r (number of largest singular values)", xlim=(1, r[-1]), ylim=(0, 1.02))
    ax.set_ylabel("accumulative ratio of squared singular values")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    path = osp.splitext(out)[0] + ".json"
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    return path


def pca_rgb(feat: Tensor) -> np.ndarray:
    """(C, H, W) features projected on their first three principal components, in [0, 1]."""
    c, h, w = feat.shape
    x = feat.reshape(c, -1).double().numpy().T  # (HW, C)
    x = x - x.mean(0, keepdims=True)
    if not np.any(x):
        return np.zeros((h, w, 3))
    vt = np.linalg.svd(x, full_matrices=False)[2][:3]
    proj = np.pad(x @ vt.T, ((0, 0), (0, 3 - len(vt))))  # (HW, C) @ (C, k) -> (HW, k), k <= 3
    lo = proj.min(0, keepdims=True)
    hi = proj.max(0, keepdims=True)
    return ((proj - lo) / np.where(hi - lo > 0, hi - lo, 1.0)).reshape(h, w, 3)


def pick_channels(pairs: list[tuple[Tensor, Tensor]], k: int) -> list[int]:
    """The ``k`` channels with the largest mean relative change |Y - Z| / (|Z| + eps)."""
    score = sum(
        (y - z).abs().flatten(1).mean(1) / (z.abs().flatten(1).mean(1) + 1e-6) for z, y in pairs
    )
    return [int(i) for i in score.argsort(descending=True)[:k]]


def select_channels(
    rows: Sequence[FeatureRow], channels: Optional[Sequence[int]], num_channels: int
) -> list[int]:
    """``channels`` if given (checked against the feature width), else :func:`pick_channels`."""
    if not channels:
        return pick_channels([(z, y) for _, _, z, y, _ in rows], num_channels)
    bad = [c for c in channels if not 0 <= c < rows[0][2].shape[0]]
    if bad:
        raise UsageError(f"channels {bad} out of range 0..{rows[0][2].shape[0] - 1}")
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
    plt = _pyplot()
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
        ax.set(xticks=[], yticks=[])
    fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
