"""Export a segmentor to ONNX (seeded dictionary) and optionally verify it with ONNX Runtime.

    python tools/deploy/export_onnx.py CONFIG CHECKPOINT --out model.onnx [--shape H W]
        [--dynamic] [--opset 17] [--seed 0] [--verify] [--bake-preprocess]
        [--allow-config-mismatch] [--precision fp16 | --quantize int8|int8-static]
        [--min-agreement 0.99] [--val-images N]

Graph: preprocessed (N, 3, H, W) float32 -> logits (N, K, H, W). fp16/int8 graphs are checked
against fp32 on the config's val split (argmax agreement, mIoU) and refused below
--min-agreement. Exit 2 with one line for bad input, a model that cannot export
deterministically or a refused graph; 1 when --verify fails. docs/deploy.md.
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys
import tempfile

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from hamseg.apis import init_model  # noqa: E402
from hamseg.apis.export import (  # noqa: E402
    check_export_options,
    check_ham_config,
    export_onnx,
    opset_range,
    require_deploy,
    verify_onnx,
)
from hamseg.apis.precision import check_agreement, compare, convert, val_batches  # noqa: E402
from hamseg.cli import run_cli  # noqa: E402


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
    p.add_argument("--verify", action="store_true", help="compare with PyTorch; exit 1 above 1e-4")
    p.add_argument("--bake-preprocess", action="store_true", help="input: raw BGR 0-255 image")
    p.add_argument(
        "--allow-config-mismatch", action="store_true", help="export a checkpoint whose "
        "training config names other ham settings than CONFIG"
    )  # fmt: skip
    lower = p.add_mutually_exclusive_group()
    lower.add_argument("--precision", choices=["fp32", "fp16"], default="fp32")
    lower.add_argument(
        "--quantize", choices=["int8", "int8-static"], help="int8: dynamic; int8-static: "
        "activation ranges calibrated on the config's val split (--val-images of it)"
    )  # fmt: skip
    p.add_argument("--min-agreement", type=float, default=0.99, help="argmax agreement with fp32")
    p.add_argument("--val-images", type=int, default=0, help="val images to check (0: all)")
    args = p.parse_args()
    require_deploy()
    shape = tuple(args.shape)
    check_export_options(shape, args.opset)  # before the model is built
    model = init_model(args.config, args.checkpoint, device="cpu")
    if not args.allow_config_mismatch:
        check_ham_config(model.cfg, args.checkpoint)
    target = args.quantize or (None if args.precision == "fp32" else args.precision)
    tmp = tempfile.TemporaryDirectory()
    fp32 = osp.join(tmp.name, "fp32.onnx") if target else args.out
    exported = export_onnx(
        model, fp32, shape, args.dynamic, args.opset, args.seed, bake=args.bake_preprocess
    )
    if target:
        batches = list(val_batches(model, args.val_images))
        convert(fp32, args.out, target, [x for x, _ in batches])
        result = compare(fp32, args.out, target, batches)
        print(result.line())
        check_agreement(result, args.out, args.min_agreement)
    print(f"wrote {args.out} (input (N, 3, {shape[0]}, {shape[1]}), seed {args.seed})")
    if args.verify:
        h, w = shape
        shapes = [(1, 3, h, w)] + ([(2, 3, h + 32, w - 16 if w > 48 else w + 16)] * args.dynamic)
        checks = verify_onnx(exported, fp32, shapes)  # the fp32 graph: PyTorch's numbers
        print("\n".join(check.line() for check in checks))
        if not all(c.ok for c in checks):
            sys.exit(1)


if __name__ == "__main__":
    run_cli(main)
