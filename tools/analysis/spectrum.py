"""Spectrum of the features before and after the Hamburger (paper Sec. 4 / App., Fig. 5).

    python tools/analysis/spectrum.py data/context_shapes/img_dir/val \
        --checkpoint work_dirs/demo/hamhead-nmf_r18-d8_context-shapes/iter_500.pth

The accumulative ratio of the squared largest r singular values of the Hamburger's input Z and
output Y (C x HW), r = 1 .. --max-rank, mean and std over the images: a PNG and a JSON beside it.
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from hamseg.apis import init_model  # noqa: E402
from hamseg.cli import CLIError, run_cli  # noqa: E402
from tools.lab.analysis.features import HAMBURGER, compute_spectra, write_spectrum  # noqa: E402
from tools.lib.images import collect_inputs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
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
    args = p.parse_args(argv)
    paths = collect_inputs(args.inputs)[: args.max_images]
    if not paths:
        raise CLIError("no images found in the inputs")
    model = init_model(args.config, args.checkpoint, args.device)
    b, a = compute_spectra(model, args.module, paths, args.max_rank, not args.no_progress)
    title = f"{osp.basename(args.checkpoint)}: {args.module}, {len(paths)} images"
    write_spectrum(b, a, args.out, title, dict(checkpoint=args.checkpoint, module=args.module))
    for r in sorted({1, 4, 16, args.max_rank} & set(range(1, args.max_rank + 1))):
        print(f"r={r:3d}: before {b[:, r - 1].mean():.3f}  after {a[:, r - 1].mean():.3f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    run_cli(lambda: sys.exit(main()))
