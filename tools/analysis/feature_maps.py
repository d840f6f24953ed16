"""Feature maps before and after the Hamburger (paper Sec. 4 / App., Fig. 6).

    python tools/analysis/feature_maps.py data/context_shapes/img_dir/val --max-images 4 \
        --checkpoint work_dirs/demo/hamhead-nmf_r18-d8_context-shapes/iter_500.pth

Per image: the prediction, the first three principal components of the Hamburger's input Z and
output Y as RGB, and the channels it changes most (or --channels) before and after.
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from hamseg.apis import init_model  # noqa: E402
from hamseg.apis.inference import class_info  # noqa: E402
from hamseg.cli import CLIError, run_cli  # noqa: E402
from tools.lab.analysis.features import (  # noqa: E402
    HAMBURGER,
    capture_features,
    draw_feature_maps,
    select_channels,  # noqa: E402
)
from tools.lib.images import collect_inputs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("inputs", nargs="+", help="image files, folders or .txt lists of paths")
    p.add_argument("--checkpoint", required=True, help="checkpoint of a HamHead model")
    p.add_argument("--config", default=None, help="config (default: the checkpoint's own)")
    p.add_argument("--module", default=HAMBURGER, help="module to analyse")
    p.add_argument("--out", default="work_dirs/analysis/feature_maps.png", help="output PNG")
    p.add_argument("--max-images", type=int, default=4, help="rows of the figure")
    p.add_argument("--num-channels", type=int, default=3, help="channels shown per image")
    p.add_argument("--channels", type=int, nargs="+", default=None, help="explicit channels")
    p.add_argument("--device", default="cpu")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    paths = collect_inputs(args.inputs)[: args.max_images]
    if not paths:
        raise CLIError("no images found in the inputs")
    model = init_model(args.config, args.checkpoint, args.device)
    rows = list(capture_features(model, args.module, paths, not args.no_progress))
    channels = select_channels(rows, args.channels, args.num_channels)
    title = f"{args.module}: before (Z) / after (Y), {osp.basename(args.checkpoint)}"
    draw_feature_maps(rows, channels, *class_info(model), args.out, title)
    print(f"channels shown: {channels}\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    run_cli(lambda: sys.exit(main()))
