"""Export a segmentor to ONNX (deterministic dictionary) and optionally verify it with ONNX Runtime.

    python tools/deploy/export_onnx.py CONFIG CHECKPOINT --out model.onnx [--shape H W]
        [--dynamic] [--opset 17] [--seed 0] [--verify]

Input: the normalised float32 (N, 3, H, W) tensor of mmseg's data preprocessor; output: the
logits (N, num_classes, H, W) of ``encode_decode``. Exit 2 with one line for bad input (a
missing file, --shape values that are not positive, an --opset outside the exporter's range or
one the model cannot be recorded at) and for a model that cannot export deterministically
(mmseg's LightHamHead, a graph with a random operator); exit 1 when --verify fails.
docs/deploy.md.
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from hamseg.apis import init_segmentor  # noqa: E402
from hamseg.apis.export import (  # noqa: E402
    check_export_options,
    export_onnx,
    opset_range,
    require_deploy,
    verify_onnx,
)
from hamseg.cli import run_cli  # noqa: E402
from hamseg.compat.package_lookup import config_file  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("config")
    p.add_argument("checkpoint")
    p.add_argument("--out", required=True, help="the .onnx file to write")
    p.add_argument("--shape", type=int, nargs=2, default=(512, 512), metavar=("H", "W"))
    p.add_argument("--dynamic", action="store_true", help="dynamic N, H, W")
    p.add_argument(
        "--opset", type=int, default=17, help="ONNX opset, {} to {}".format(*opset_range())
    )
    p.add_argument("--seed", type=int, default=0, help="eval_seed of every ham")
    p.add_argument(
        "--verify",
        action="store_true",
        help="compare ONNX Runtime with PyTorch; exit 1 above 1e-4 relative",
    )
    args = p.parse_args()
    require_deploy()
    shape = tuple(args.shape)
    check_export_options(shape, args.opset)  # before the model is built
    model = init_segmentor(args.checkpoint, config_file(args.config))
    exported = export_onnx(model, args.out, shape, args.dynamic, args.opset, args.seed)
    print(f"wrote {args.out} (input (N, 3, {shape[0]}, {shape[1]}), seed {args.seed})")
    if args.verify:
        shapes = [(1, 3, *shape)]
        if args.dynamic:
            shapes.append((2, 3, shape[0] + 32, shape[1] - 16 if shape[1] > 48 else shape[1] + 16))
        checks = verify_onnx(exported, args.out, shapes)
        for check in checks:
            print(check.line())
        if not all(c.ok for c in checks):
            sys.exit(1)


if __name__ == "__main__":
    run_cli(main)
