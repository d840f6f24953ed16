"""The paper's analyses of the features before (Z) and after (Y) the Hamburger (Sec. 4 / App.):
the singular-value spectrum of the C x HW unfoldings (Fig. 5) and the feature maps (Fig. 6).

    python -m projects.context_lab.context_lab.features spectrum data/context_shapes/img_dir/val \\
        --checkpoint work_dirs/demo/hamhead-nmf_r18-d8_context-shapes/iter_500.pth
    python -m projects.context_lab.context_lab.features maps IMAGES --checkpoint CKPT

``spectrum``: the accumulative ratio of the squared r largest singular values of Z and Y,
r = 1 .. --max-rank, mean and std over the images (PNG and JSON). ``maps``: per image, the
prediction, Z and Y's first three principal components as RGB and the channels the block
changes most (or --channels).
"""

from __future__ import annotations

import glob
import json
import os
import os.path as osp
from collections.abc import Iterator, Sequence
from typing import Any, Optional

import cv2
import numpy as np
import torch
from torch import Tensor, nn

from hamseg.apis import inference_model, init_model
from hamseg.utils.errors import UsageError


def capture(model: nn.Module, name: str, paths: Sequence[str]) -> Iterator[tuple]:
    """Per image: (path, RGB image, Z, Y (C, H, W) of module ``name``, predicted labels)."""
    modules = dict(model.named_modules())
    if name not in modules:
        heads = ", ".join(n for n in modules if n.startswith("decode_head"))
        raise UsageError(f"--module {name}: the model has no such module; one of: {heads}")
    store: dict[str, Tensor] = {}
    hook = lambda m, i, o: store.update(
        z=i[0][0].detach().float().cpu(), y=o[0].detach().float().cpu()
    )
    handle = modules[name].register_forward_hook(hook)
    try:
        for path in paths:
            pred = inference_model(model, path).pred_sem_seg.data[0].cpu().numpy()
            yield path, cv2.imread(path)[..., ::-1], store["z"], store["y"], pred
    finally:
        handle.remove()


def cumulative_energy(feat: Tensor, max_rank: int) -> np.ndarray:
    """sum_{i<=r} s_i^2 / sum_i s_i^2 of the C x HW unfolding, r = 1 .. max_rank."""
    s2 = torch.linalg.svdvals(feat.reshape(feat.shape[0], -1).double()).pow(2)
    ratio = (s2.cumsum(0) / s2.sum().clamp_min(1e-12)).numpy()[:max_rank]
    return np.concatenate([ratio, np.ones(max_rank - len(ratio))])


def pca_rgb(feat: Tensor) -> np.ndarray:
    """(C, H, W) projected on its first three principal components, each scaled to [0, 1]."""
    c, h, w = feat.shape
    x = feat.reshape(c, -1).double().numpy().T  # (HW, C)
    x = x - x.mean(0, keepdims=True)
    if not np.any(x):
        return np.zeros((h, w, 3))
    vt = np.linalg.svd(x, full_matrices=False)[2][:3]
    proj = np.pad(x @ vt.T, ((0, 0), (0, 3 - len(vt))))  # (HW, C) @ (C, k) -> (HW, k)
    lo, hi = proj.min(0), proj.max(0)
    return ((proj - lo) / np.where(hi > lo, hi - lo, 1.0)).reshape(h, w, 3)


def pick_channels(pairs: Sequence[tuple[Tensor, Tensor]], k: int) -> list[int]:
    """The ``k`` channels with the largest mean relative change |Y - Z| / (|Z| + eps)."""
    change = lambda z, y: (y - z).abs().flatten(1).mean(1) / (z.abs().flatten(1).mean(1) + 1e-6)
    return [int(i) for i in sum(change(z, y) for z, y in pairs).argsort(descending=True)[:k]]


def spectrum(rows: list[tuple], max_rank: int, out: str, title: str) -> dict[str, Any]:
    """Plot mean +- std of Z's and Y's curves into ``out`` (PNG); write them to its JSON."""
    import matplotlib.pyplot as plt

    r = np.arange(1, max_rank + 1)
    fig, ax = plt.subplots(figsize=(5.5, 4), dpi=120)
    summary: dict[str, Any] = dict(title=title, num_images=len(rows), rank=r.tolist())
    for i, (key, colour) in enumerate((("before", "tab:blue"), ("after", "tab:red"))):
        curves = np.stack([cumulative_energy(row[2 + i], max_rank) for row in rows])
        mean, std = curves.mean(0), curves.std(0)
        ax.plot(r, mean, color=colour, label=f"{key} the block ({'ZY'[i]})", lw=2)
        ax.fill_between(
            r, np.clip(mean - std, 0, 1), np.clip(mean + std, 0, 1), color=colour, alpha=0.2
        )
        summary.update({f"{key}_mean": mean.round(5).tolist(), f"{key}_std": std.round(5).tolist()})
    ax.set(xlabel="r", ylabel="accumulative ratio of squared singular values", ylim=(0, 1.02))
    ax.legend(loc="lower right")
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    with open(osp.splitext(out)[0] + ".json", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    return summary


def feature_maps(rows: list[tuple], channels: Sequence[int], palette: Any, out: str) -> None:
    """One row per image: image, prediction, PCA of Z and Y, then Z and Y of each channel."""
    import matplotlib.pyplot as plt

    ncols = 4 + 2 * len(channels)
    fig, axes = plt.subplots(
        len(rows), ncols, figsize=(1.6 * ncols, 1.7 * len(rows)), squeeze=False
    )
    for ax_row, (path, img, z, y, pred) in zip(axes, rows):
        panels = [img, np.asarray(palette, np.uint8)[pred], pca_rgb(z), pca_rgb(y)]
        panels += [f[c].numpy() for c in channels for f in (z, y)]
        names = [osp.basename(path), "prediction", "Z: PCA", "Y: PCA"]
        names += [f"{t} ch {c}" for c in channels for t in "ZY"]
        for ax, pic, name in zip(ax_row, panels, names):
            ax.imshow(pic, interpolation="nearest")
            ax.set_title(name, fontsize=7)
            ax.set(xticks=[], yticks=[])
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main(argv: Optional[list[str]] = None) -> None:
    import argparse

    import matplotlib

    matplotlib.use("Agg")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("analysis", choices=("spectrum", "maps"))
    p.add_argument("inputs", nargs="+", help="images or folders of images")
    p.add_argument("--checkpoint", help="a checkpoint with a Hamburger (its config inside)")
    p.add_argument("--config", help="config (default: the checkpoint's own)")
    p.add_argument("--module", default="decode_head.hamburger")
    p.add_argument("--max-images", type=int, help="default: 100 (spectrum), 4 (maps)")
    p.add_argument("--max-rank", type=int, default=32)
    p.add_argument("--channels", type=int, nargs="+", help="maps: these channels")
    p.add_argument("--out", help="PNG (default: work_dirs/analysis/<analysis>.png)")
    p.add_argument("--device", default="cpu")
    args = p.parse_args(argv)
    exts = (".png", ".jpg", ".jpeg", ".bmp")
    found = [sorted(glob.glob(osp.join(i, "*"))) if osp.isdir(i) else [i] for i in args.inputs]
    paths = [f for fs in found for f in fs if f.lower().endswith(exts)]
    paths = paths[: args.max_images or (100 if args.analysis == "spectrum" else 4)]
    if not paths:
        raise UsageError(f"no images in {' '.join(args.inputs)}")
    out = args.out or f"work_dirs/analysis/{args.analysis}.png"
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    model = init_model(args.config, args.checkpoint, args.device)
    rows = list(capture(model, args.module, paths))
    if args.analysis == "spectrum":
        s = spectrum(rows, args.max_rank, out, f"{args.module}, {len(rows)} images")
        print(f"r=1: before {s['before_mean'][0]:.3f}, after {s['after_mean'][0]:.3f}")
    else:
        channels = args.channels or pick_channels([(z, y) for _, _, z, y, _ in rows], 3)
        feature_maps(rows, channels, model.dataset_meta["palette"], out)
        print(f"channels shown: {channels}")
    print(f"wrote {out}")


if __name__ == "__main__":
    from hamseg.cli import run_cli

    run_cli(main)
