"""Spectrum of the features before and after the Hamburger (paper Sec. 4 / App., Fig. 5).

For every image the input Z and the output Y of the Hamburger block (``decode_head.hamburger``)
are unfolded to C x HW matrices; the plot shows the accumulative ratio of the squared largest r
singular values over all squared singular values, r = 1 .. --max-rank, averaged over the images
(shaded: one standard deviation). A curve that rises faster means energy concentrated in fewer
directions, the low-rank effect the paper reports for Hamburger.

Usage::

    python tools/analysis/spectrum.py data/context_shapes/img_dir/val \
        --checkpoint work_dirs/demo/hamhead-nmf_r18-d8_context-shapes/iter_400.pth \
        --out work_dirs/analysis/spectrum.png

Writes the PNG and, beside it, a JSON with the curves.
"""

from __future__ import annotations

import argparse
import json
import os
import os.path as osp
import sys
from typing import Optional

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import Tensor, nn  # noqa: E402

from tools.infer import collect_inputs, load_model, read_image_rgb  # noqa: E402


def get_module(model: nn.Module, name: str) -> nn.Module:
    """The submodule ``name`` (dotted path) of ``model``.

    Raises:
        ValueError: If there is no such module (e.g. an FCN checkpoint has no Hamburger).
    """
    modules = dict(model.named_modules())
    if name not in modules:
        raise ValueError(
            f"the model has no module {name!r} (is this a HamHead checkpoint?); pass --module "
            "with one of: " + ", ".join(n for n in modules if n.startswith("decode_head"))
        )
    return modules[name]


def capture_features(model: nn.Module, module_name: str, paths: list[str], progress: bool = True):
    """Yield ``(path, rgb image, Z, Y, prediction)`` for each image: input and output of the
    module (C, H, W) and the predicted label map."""
    from mmseg.apis import inference_model
    from tqdm import tqdm

    module = get_module(model, module_name)
    store: dict[str, Tensor] = {}

    def hook(_m: nn.Module, inputs: tuple, output: Tensor) -> None:
        store["z"] = inputs[0].detach()[0].float().cpu()
        store["y"] = output.detach()[0].float().cpu()

    handle = module.register_forward_hook(hook)
    try:
        for path in tqdm(paths, desc="features", unit="img", disable=not progress):
            img = read_image_rgb(path)
            result = inference_model(model, np.ascontiguousarray(img[:, :, ::-1]))
            pred = result.pred_sem_seg.data[0].cpu().numpy()
            yield path, img, store["z"], store["y"], pred
    finally:
        handle.remove()


def cumulative_energy(feat: Tensor, max_rank: int) -> np.ndarray:
    """Accumulative ratio sum_{i<=r} s_i^2 / sum_i s_i^2 of the C x HW unfolding, r = 1..max_rank.

    Args:
        feat: Features (C, H, W).
        max_rank: Largest r reported; ranks beyond min(C, HW) repeat 1.0.
    """
    mat = feat.reshape(feat.shape[0], -1).double()
    s2 = torch.linalg.svdvals(mat).pow(2)
    total = s2.sum().clamp_min(1e-12)
    ratio = (s2.cumsum(0) / total).numpy()
    out = np.ones(max_rank)
    n = min(max_rank, len(ratio))
    out[:n] = ratio[:n]
    return out


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


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("inputs", nargs="+", help="image files, folders or .txt lists of paths")
    p.add_argument("--checkpoint", required=True, help="checkpoint of a HamHead model")
    p.add_argument("--config", default=None, help="config (default: the checkpoint's own)")
    p.add_argument("--module", default="decode_head.hamburger", help="module to analyse")
    p.add_argument("--out", default="work_dirs/analysis/spectrum.png", help="output PNG")
    p.add_argument("--max-images", type=int, default=100, help="use at most this many images")
    p.add_argument("--max-rank", type=int, default=32, help="largest r on the x axis")
    p.add_argument("--device", default="cpu")
    p.add_argument("--no-progress", action="store_true")
    return p.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    """Compute and plot the spectra; returns the exit code."""
    args = parse_args(argv)
    paths = collect_inputs(args.inputs)[: args.max_images]
    if not paths:
        print("error: no images found in the inputs", file=sys.stderr)
        return 2
    model = load_model(args.checkpoint, args.config, args.device)
    before, after = [], []
    for _, _, z, y, _ in capture_features(model, args.module, paths, not args.no_progress):
        before.append(cumulative_energy(z, args.max_rank))
        after.append(cumulative_energy(y, args.max_rank))
    b, a = np.stack(before), np.stack(after)
    os.makedirs(osp.dirname(osp.abspath(args.out)), exist_ok=True)
    title = f"{osp.basename(args.checkpoint)}: {args.module}, {len(paths)} images"
    plot_spectrum(b, a, args.out, title)
    summary = dict(
        checkpoint=args.checkpoint,
        module=args.module,
        num_images=len(paths),
        rank=list(range(1, args.max_rank + 1)),
        before_mean=b.mean(0).round(5).tolist(),
        before_std=b.std(0).round(5).tolist(),
        after_mean=a.mean(0).round(5).tolist(),
        after_std=a.std(0).round(5).tolist(),
    )
    with open(osp.splitext(args.out)[0] + ".json", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    for r in sorted({1, 4, 16, args.max_rank} & set(range(1, args.max_rank + 1))):
        print(f"r={r:3d}: before {b[:, r - 1].mean():.3f}  after {a[:, r - 1].mean():.3f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
