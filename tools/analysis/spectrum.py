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
import os.path as osp
import sys
from typing import Optional

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from hamseg.analysis import HAMBURGER, compute_spectra, write_spectrum  # noqa: E402
from hamseg.apis import collect_inputs, init_segmentor  # noqa: E402
from hamseg.cli import CLIError, run_cli  # noqa: E402


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("inputs", nargs="+", help="image files, folders or .txt lists of paths")
    p.add_argument("--checkpoint", required=True, help="checkpoint of a HamHead model")
    p.add_argument("--config", default=None, help="config (default: the checkpoint's own)")
    p.add_argument("--module", default=HAMBURGER, help="module to analyse")
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
        raise CLIError("no images found in the inputs")
    model = init_segmentor(args.checkpoint, args.config, args.device)
    b, a = compute_spectra(model, args.module, paths, args.max_rank, not args.no_progress)
    title = f"{osp.basename(args.checkpoint)}: {args.module}, {len(paths)} images"
    info = dict(checkpoint=args.checkpoint, module=args.module)
    write_spectrum(b, a, args.out, title, info)
    for r in sorted({1, 4, 16, args.max_rank} & set(range(1, args.max_rank + 1))):
        print(f"r={r:3d}: before {b[:, r - 1].mean():.3f}  after {a[:, r - 1].mean():.3f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    run_cli(lambda: sys.exit(main()))
