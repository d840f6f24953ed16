"""Export a segmentor to ONNX (seeded dictionary), verified against PyTorch.

    python tools/deploy/export_onnx.py CONFIG CHECKPOINT --out model.onnx [--shape H W]
        [--dynamic] [--opset 17] [--seed 0] [--no-verify] [--bake-preprocess]
        [--cfg-options KEY=VALUE ...] [--allow-config-mismatch]
        [--precision fp16 | --quantize int8|int8-dynamic] [--min-agreement 0.99]
        [--min-worst-agreement 0.95] [--max-miou-drop 0.5] [--val-images N]
        [--calibration-images 16]

Graph: preprocessed (N, 3, H, W) float32 -> logits (N, K, H, W). The fp32 graph is compared
with PyTorch on random inputs (exit 1 above 1e-4 relative, the file removed); fp16/int8 files
are checked against fp32 on the config's val split (argmax agreement overall and of the worst
image, val mIoU drop) and removed outside the bounds. Exit 2 with one line for bad input, a
model that cannot export deterministically or a refused graph. docs/deploy.md.
"""

from __future__ import annotations

import argparse
import os
import os.path as osp
import sys
import tempfile
from collections.abc import Sequence

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

from mmengine.config import Config, DictAction  # noqa: E402

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from hamseg.apis import init_model  # noqa: E402
from hamseg.apis.export import (  # noqa: E402
    TOLERANCE,
    Verification,
    check_export_options,
    export_onnx,
    opset_range,
    require_deploy,
    verify_onnx,
)
from hamseg.cli import run_cli  # noqa: E402
from hamseg.compat.package_lookup import config_file  # noqa: E402
from hamseg.utils.config import merge_cfg_options  # noqa: E402
from tools.deploy.precision import (  # noqa: E402
    CALIBRATION_IMAGES,
    Gates,
    calibration_inputs,
    check_gates,
    compare,
    convert,
    fit,
    val_batches,
)
from tools.lib.head_check import check_checkpoint  # noqa: E402


class VerificationFailed(Exception):
    """ONNX Runtime's logits differ from PyTorch's; the file was removed (exit code 1)."""


def verification_shapes(shape: Sequence[int], dynamic: bool) -> list[tuple[int, int, int, int]]:
    """The inputs :func:`verify_onnx` checks: one of the export's size; with ``dynamic`` also a
    batch of 2 at a second size."""
    h, w = shape
    return [(1, 3, h, w)] + [(2, 3, h + 32, w - 16 if w > 48 else w + 16)] * dynamic


def reject_failed(checks: Sequence[Verification], path: str) -> None:
    """Remove ``path`` and raise :class:`VerificationFailed` if a check failed."""
    if failed := [c for c in checks if not c.ok]:
        os.remove(path)
        worst = max(failed, key=lambda c: c.max_rel)
        raise VerificationFailed(
            f"{path}: ONNX Runtime's logits differ from PyTorch's by relative {worst.max_rel:.3g}"
            f" (> {TOLERANCE:g}; argmax agreement {100 * worst.argmax_agreement:.3f}% at "
            f"{'x'.join(map(str, worst.shape))}); the file was removed. Export at another "
            "--opset, or report the config: the graph computes something else"
        )


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add = p.add_argument
    add("config")
    add("checkpoint")
    add("--out", required=True, help="the .onnx file to write")
    add("--shape", type=int, nargs=2, default=(512, 512), metavar=("H", "W"))
    add("--dynamic", action="store_true", help="dynamic N, H, W")
    add("--opset", type=int, default=17, help="ONNX opset, 11 to {1}".format(*opset_range()))
    add("--seed", type=int, default=0, help="eval_seed of every ham")
    add(
        "--verify",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="compare the fp32 graph with PyTorch; above 1e-4 relative: exit 1, file removed",
    )
    add("--bake-preprocess", action="store_true", help="input: raw BGR 0-255 image")
    add("--cfg-options", nargs="+", action=DictAction, help="override config keys: key=value")
    add(
        "--allow-config-mismatch",
        action="store_true",
        help="export a checkpoint whose recorded head or ham differs from CONFIG's",
    )
    lower = p.add_mutually_exclusive_group()
    lower.add_argument("--precision", choices=["fp32", "fp16"], default="fp32")
    lower.add_argument(
        "--quantize",
        choices=["int8", "int8-dynamic"],
        help="int8: static, activation ranges calibrated on the config's train split (the "
        "recipe of docs/deploy.md); int8-dynamic: ORT's quantize_dynamic (slower than fp32)",
    )
    gates = Gates()
    add("--min-agreement", type=float, default=gates.min_agreement, help="argmax, all pixels")
    add("--min-worst-agreement", type=float, default=gates.min_worst, help="of the worst image")
    add("--max-miou-drop", type=float, default=gates.max_miou_drop, help="val mIoU, points")
    add("--val-images", type=int, default=0, help="val images to check (0: all)")
    add(
        "--calibration-images",
        type=int,
        default=CALIBRATION_IMAGES,
        help="int8: images spread over the train split (else val) for the activation ranges",
    )
    return p.parse_args()


def main() -> None:
    args = parse_args()
    require_deploy()
    shape = tuple(args.shape)
    check_export_options(shape, args.opset)  # before the model is built
    cfg = Config.fromfile(config_file(args.config))  # hamseg:: and mmseg:: names too
    merge_cfg_options(cfg, args.cfg_options or {})  # data_root=PATH moves every split
    model = init_model(cfg, args.checkpoint, device="cpu")  # strict: its keys and shapes
    if not args.allow_config_mismatch:
        fix = "export with the config it was trained with, or pass --allow-config-mismatch"
        check_checkpoint(cfg, args.checkpoint, fix + " to export anyway")
    target = args.quantize or (None if args.precision == "fp32" else args.precision)
    tmp = tempfile.TemporaryDirectory()
    fp32 = osp.join(tmp.name, "fp32.onnx") if target else args.out
    exported = export_onnx(
        model, fp32, shape, args.dynamic, args.opset, args.seed, bake=args.bake_preprocess
    )
    if args.verify:
        checks = verify_onnx(exported, fp32, verification_shapes(shape, args.dynamic))
        print("\n".join(check.line() for check in checks))
        try:
            reject_failed(checks, fp32)
        except VerificationFailed as err:
            print(f"error: {err}", file=sys.stderr)
            sys.exit(1)
    if target:
        size = None if args.dynamic else shape  # a static graph: images resized to --shape
        calibration = []
        if target == "int8":
            calibration, split = calibration_inputs(model, args.calibration_images)
            calibration = [x for x, _ in fit([(x, x[0, 0]) for x in calibration], size)]
            print(f"int8: activation ranges from {len(calibration)} images of the {split} split")
        batches = fit(list(val_batches(model, args.val_images)), size)
        convert(fp32, args.out, target, calibration)
        result = compare(fp32, args.out, target, batches)  # the file written, metadata and all
        print(result.line())
        gates = Gates(args.min_agreement, args.min_worst_agreement, args.max_miou_drop)
        check_gates(result, args.out, gates)
    print(f"wrote {args.out} (input (N, 3, {shape[0]}, {shape[1]}), seed {args.seed})")


if __name__ == "__main__":
    run_cli(main)
