"""Feature maps before and after the Hamburger (paper Sec. 4 / App., Fig. 6).

One row per image: the image, the prediction, the first three principal components of the
features before (Z) and after (Y) the Hamburger shown as RGB, then a few channels before/after
on a shared colour scale per channel. By default the channels are those the Hamburger changes
most (largest mean |Y - Z| relative to |Z|, over the images); ``--channels`` picks them.

Usage::

    python tools/analysis/feature_maps.py data/context_shapes/img_dir/val --max-images 4 \
        --checkpoint work_dirs/demo/hamhead-nmf_r18-d8_context-shapes/iter_400.pth \
        --out work_dirs/analysis/feature_maps.png
"""

from __future__ import annotations

import argparse
import os
import os.path as osp
import sys
from typing import Optional

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
import numpy as np  # noqa: E402
from torch import Tensor  # noqa: E402

from tools.analysis.spectrum import capture_features  # noqa: E402
from tools.infer import class_info, collect_inputs, draw_overlay, load_model  # noqa: E402


def pca_rgb(feat: Tensor) -> np.ndarray:
    """Project (C, H, W) features on their first three principal components, scaled to [0, 1]."""
    c, h, w = feat.shape
    x = feat.reshape(c, -1).double().numpy().T  # (HW, C)
    x = x - x.mean(0, keepdims=True)
    if not np.any(x):
        return np.zeros((h, w, 3))
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    k = min(3, vt.shape[0])
    proj = x @ vt[:k].T
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


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("inputs", nargs="+", help="image files, folders or .txt lists of paths")
    p.add_argument("--checkpoint", required=True, help="checkpoint of a HamHead model")
    p.add_argument("--config", default=None, help="config (default: the checkpoint's own)")
    p.add_argument("--module", default="decode_head.hamburger", help="module to analyse")
    p.add_argument("--out", default="work_dirs/analysis/feature_maps.png", help="output PNG")
    p.add_argument("--max-images", type=int, default=4, help="rows of the figure")
    p.add_argument("--num-channels", type=int, default=3, help="channels shown per image")
    p.add_argument("--channels", type=int, nargs="+", default=None, help="explicit channels")
    p.add_argument("--device", default="cpu")
    p.add_argument("--no-progress", action="store_true")
    return p.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    """Draw the figure; returns the exit code."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    args = parse_args(argv)
    paths = collect_inputs(args.inputs)[: args.max_images]
    if not paths:
        print("error: no images found in the inputs", file=sys.stderr)
        return 2
    model = load_model(args.checkpoint, args.config, args.device)
    classes, palette = class_info(model)
    rows = list(capture_features(model, args.module, paths, not args.no_progress))
    channels = args.channels or pick_channels([(z, y) for _, _, z, y, _ in rows], args.num_channels)
    num_c = rows[0][2].shape[0]
    bad = [c for c in channels if not 0 <= c < num_c]
    if bad:
        print(f"error: channels {bad} out of range 0..{num_c - 1}", file=sys.stderr)
        return 2

    ncols = 4 + 2 * len(channels)
    fig, axes = plt.subplots(
        len(rows), ncols, figsize=(1.6 * ncols, 1.7 * len(rows) + 0.4), dpi=110, squeeze=False
    )
    for r, (path, img, z, y, pred) in enumerate(rows):
        overlay = draw_overlay(img, pred, classes, palette, legend="present")[: img.shape[0]]
        panels = [(img, osp.basename(path)), (overlay, "prediction + legend")]
        panels += [(pca_rgb(z), "Z: PCA as RGB"), (pca_rgb(y), "Y: PCA as RGB")]
        for i, (pic, title) in enumerate(panels):
            axes[r, i].imshow(pic, interpolation="nearest")
            axes[r, i].set_title(title, fontsize=7)
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
    fig.suptitle(
        f"{args.module}: before (Z) / after (Y), {osp.basename(args.checkpoint)}", fontsize=8
    )
    fig.tight_layout()
    os.makedirs(osp.dirname(osp.abspath(args.out)), exist_ok=True)
    fig.savefig(args.out)
    plt.close(fig)
    print(f"channels shown: {channels}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
