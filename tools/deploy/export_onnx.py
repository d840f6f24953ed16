"""Export a segmentor to ONNX (seeded dictionaries), checked against PyTorch (docs/deploy.md).

    python tools/deploy/export_onnx.py CONFIG CKPT --out model.onnx [--shape H W] [--static]
        [--opset 17] [--seed 0] [--no-verify] [--bake-preprocess] [--cfg-options KEY=VALUE ...]
        [--allow-config-mismatch] [--precision fp16 | --quantize int8] [--min-agreement 0.99]
        [--min-worst-agreement 0.95] [--max-miou-drop 0.5] [--val-images N] [--calibration-images K]

Graph: normalised (N, 3, H, W) float32 -> logits (N, K, H, W); N, H, W dynamic unless --static
(then --shape only). The fp32 graph is compared with PyTorch on random inputs (above 1e-4
relative: exit 1, the file removed); an fp16/int8 file with fp32 on the config's val split
(argmax agreement of all pixels and of the worst image, mIoU drop), removed outside the bounds.
Bad input, a model that cannot export deterministically, a missing val split: one line, exit 2.
"""

import argparse
import os
import os.path as osp
import sys
import tempfile

from mmengine.config import DictAction

from hamseg.apis import export, init_model
from hamseg.cli import CLIError, build_config, run_cli
from hamseg.utils.errors import require_file


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add = p.add_argument
    add("config")
    add("checkpoint")
    add("--out", required=True, help="the .onnx file to write")
    add("--shape", type=int, nargs=2, default=(512, 512), metavar=("H", "W"), help="example")
    add("--static", action="store_true", help="a graph of --shape only (default: any N, H, W)")
    add(
        "--dynamic", action="store_true", help=argparse.SUPPRESS
    )  # old command lines: dynamic is the default
    add("--opset", type=int, default=17, help="ONNX opset (11 to the highest torch writes)")
    add("--seed", type=int, default=0, help="eval_seed of every ham")
    add("--verify", action=argparse.BooleanOptionalAction, default=True, help="against PyTorch")
    add("--bake-preprocess", action="store_true", help="input: the raw BGR 0-255 image")
    add("--cfg-options", nargs="+", action=DictAction, help="override config keys: key=value")
    add("--allow-config-mismatch", action="store_true", help="a checkpoint of another head")
    lower = p.add_mutually_exclusive_group()
    lower.add_argument("--precision", choices=["fp32", "fp16"], default="fp32")
    lower.add_argument("--quantize", choices=["int8"], help="static int8 (docs/deploy.md)")
    add("--min-agreement", type=float, default=0.99, help="argmax, all val pixels")
    add("--min-worst-agreement", type=float, default=0.95, help="argmax, the worst val image")
    add("--max-miou-drop", type=float, default=0.5, help="val mIoU points")
    add("--val-images", type=int, default=0, help="val images, spread over the split (0: all)")
    add("--calibration-images", type=int, default=16, help="int8: train images")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    shape = tuple(args.shape)
    export.check_export_options(shape, args.opset)  # before anything is built
    require_file(args.checkpoint, "checkpoint file")
    cfg = build_config(args.config, args.cfg_options)  # data_root=PATH moves every split
    target = args.quantize or (None if args.precision == "fp32" else args.precision)
    if target and args.bake_preprocess:
        raise CLIError(f"--bake-preprocess with {target}: the val check feeds normalised images")
    if target:  # the data the check needs, before the export
        val, calibration_set = export.gate_datasets(cfg, target)
    model = init_model(cfg, args.checkpoint, device="cpu")  # strict: its keys and shapes
    if not args.allow_config_mismatch:
        fix = "export with the config it was trained with, or pass --allow-config-mismatch"
        export.check_trained_head(cfg, args.checkpoint, fix + " to export anyway")
    tmp = tempfile.TemporaryDirectory()
    fp32 = osp.join(tmp.name, "fp32.onnx") if target else args.out
    dynamic = not args.static
    exported = export.export_onnx(
        model, fp32, shape, dynamic, args.opset, args.seed, args.bake_preprocess
    )
    if args.verify:  # the export's size; a dynamic graph also a batch of 2 at another size
        h, w = shape
        shapes = [(1, 3, h, w)] + [(2, 3, h + 32, w - 16 if w > 48 else w + 16)] * dynamic
        checks = export.verify_onnx(exported, fp32, shapes)
        for c in checks:
            c["at"] = "x".join(map(str, c["shape"]))
            bad = c["max_rel"] > export.TOLERANCE
            print(
                f"{c['at']}: max |diff| {c['max_abs']:.3g}, relative {c['max_rel']:.3g}, argmax "
                f"agreement {100 * c['agreement']:.3f}% -> "
                + (f"FAILED (> {export.TOLERANCE:g})" if bad else "ok")
            )
        if (worst := max(checks, key=lambda c: c["max_rel"]))["max_rel"] > export.TOLERANCE:
            os.remove(fp32)
            print(
                f"error: {args.out}: ONNX Runtime's logits differ from PyTorch's by relative "
                f"{worst['max_rel']:.3g} (> {export.TOLERANCE:g}) at {worst['at']}"
                "; the file was removed: export at another --opset, or report the config",
                file=sys.stderr,
            )
            sys.exit(1)
    if target:
        size = shape if args.static else None  # a static graph sees the images resized to it
        calibration = []
        if target == "int8":
            calibration = [
                x for x, _ in export.samples(model, calibration_set, args.calibration_images, size)
            ]
            print(f"int8: activation ranges from {len(calibration)} images of the train split")
        batches = export.samples(model, val, args.val_images, size)
        export.convert(fp32, args.out, target, calibration)
        r = export.compare(fp32, args.out, batches, model.decode_head.num_classes)
        drop = r["miou_fp32"] - r["miou"]
        line = (
            f"{target}: argmax agreement with fp32 {100 * r['agreement']:.2f}% (worst image "
            f"{100 * r['worst']:.2f}%), val mIoU {r['miou']:.2f} (fp32 {r['miou_fp32']:.2f}, "
            f"drop {round(drop, 2) + 0.0:.2f})"
        )
        print(line)
        missed = [f"agreement below --min-agreement {args.min_agreement:g}"] * (
            r["agreement"] < args.min_agreement
        )
        missed += [f"worst image below --min-worst-agreement {args.min_worst_agreement:g}"] * (
            r["worst"] < args.min_worst_agreement
        )
        missed += [f"mIoU drop {drop:.2f} above --max-miou-drop {args.max_miou_drop:g}"] * (
            drop > args.max_miou_drop
        )
        if missed:
            os.remove(args.out)
            raise CLIError(
                f"{args.out}: {line}: {', '.join(missed)}; the file was removed (use another "
                "--precision, or loosen the bound to keep it)"
            )
    size = f"{shape[0]}x{shape[1]} only" if args.static else "any size"
    print(f"wrote {args.out} (input (N, 3, H, W): {size}; seed {args.seed})")


if __name__ == "__main__":
    run_cli(main)
