"""Segment images with a trained checkpoint and write colour overlays with a legend (PNG).

Usage::

    python tools/infer.py IMAGE [IMAGE ...] --checkpoint CKPT [--config CFG] [--out-dir DIR]
    python tools/infer.py path/to/folder   --checkpoint work_dirs/demo/.../iter_400.pth
    python tools/infer.py images.txt       --checkpoint CKPT      # a text file, one path a line
    python tools/infer.py IMAGES --config CFG --backend onnxruntime --model model.onnx

Inputs may be image files, folders (searched recursively for image files) or ``.txt`` lists. Any
size works, and grayscale, RGBA (composited over white) and 16-bit images are converted to 8-bit
RGB first. The config defaults to the one stored in the checkpoint (mmengine saves it). For each
input ``<name>.<ext>`` the output folder gets ``<name>_overlay.png``: the image with the
predicted classes painted over it, and a legend of the classes present (``--legend all`` lists
every class). ``--save-label`` also writes the raw label map ``<name>_label.png``.

``--backend onnxruntime --model FILE.onnx`` runs the exported network (tools/deploy/export_onnx.py)
in ONNX Runtime and needs no PyTorch weights: with ``--config`` alone, the test pipeline,
preprocessing, class names and palette come from the config (its dataset's classes), and no
weights are loaded. A ``--checkpoint`` is still taken as with PyTorch (class names from its meta,
loaded strictly). The graph's class count must equal the number of class names (else one line
naming both files, exit 2).

An input that is not a complete image (truncated, not an image, unreadable), an image a ``.txt``
list names that does not exist, and a ``.txt`` input that is not a list of images (notes caught
by a shell glob) are each reported in one line naming them and skipped; the others are
processed. Exit codes: 0 all inputs written, 1 some inputs skipped (listed on stderr), 2 nothing
run: a missing checkpoint, config, ONNX model or input given on the command line, no
--checkpoint (with --backend onnxruntime: no --checkpoint and no --config), no images found, a
checkpoint that does not fit the config (one line naming the layer, both shapes and, for the
classifier, both class counts), or an ONNX model of another class count.
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys
from typing import Optional

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from hamseg.apis import init_segmentor, segment_images  # noqa: E402
from hamseg.apis.images import gather_inputs  # noqa: E402
from hamseg.apis.inference import init_segmentor_from_config  # noqa: E402
from hamseg.cli import CLIError, run_cli  # noqa: E402
from hamseg.utils.errors import require_file  # noqa: E402


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("inputs", nargs="+", help="image files, folders or .txt lists of paths")
    p.add_argument(
        "--checkpoint",
        help="checkpoint (.pth) of a trained model (with --backend onnxruntime: optional, "
        "given --config)",
    )
    p.add_argument("--config", default=None, help="config (default: the checkpoint's own)")
    p.add_argument("--out-dir", default="work_dirs/infer", help="where the PNGs go")
    p.add_argument("--opacity", type=float, default=0.5, help="weight of the class colours")
    p.add_argument("--legend", choices=["present", "all"], default="present")
    p.add_argument("--save-label", action="store_true", help="also write raw label maps")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N")
    p.add_argument("--backend", choices=["pytorch", "onnxruntime"], default="pytorch")
    p.add_argument(
        "--model",
        help="--backend onnxruntime: the exported .onnx (class names and palette come from "
        "the checkpoint, else from the config's dataset)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p.parse_args(argv)


def check_options(args: argparse.Namespace) -> None:
    """One line for options that cannot run together (before any file is read)."""
    if args.backend == "onnxruntime" and not args.model:
        raise CLIError(
            "--backend onnxruntime needs --model FILE.onnx (tools/deploy/export_onnx.py)"
        )
    if args.checkpoint is not None:
        return
    if args.backend == "pytorch":
        raise CLIError(
            "--checkpoint CHECKPOINT is required: the trained weights (only --backend "
            "onnxruntime --model FILE.onnx --config CONFIG runs without them)"
        )
    if args.config is None:
        raise CLIError(
            "--backend onnxruntime without --checkpoint needs --config CONFIG: the test "
            "pipeline, class names and palette come from it"
        )


def main(argv: Optional[list[str]] = None) -> int:
    """Run inference on every input; returns the exit code."""
    from tqdm import tqdm

    args = parse_args(argv)
    check_options(args)
    paths, skipped = gather_inputs(args.inputs)
    if not paths and not skipped:
        raise CLIError("no images found in the inputs")
    if args.backend == "onnxruntime":
        require_file(args.model, "ONNX model")
    for _, message in skipped:
        print(f"error: {message}; skipped", file=sys.stderr)
    total = len(paths) + len(skipped)
    if args.checkpoint is None:  # ONNX Runtime brings the weights: none are loaded
        model = init_segmentor_from_config(args.config, args.device)
        names_from = ("config", args.config)
    else:
        model = init_segmentor(args.checkpoint, args.config, args.device)
        names_from = ("checkpoint", args.checkpoint)
    if args.backend == "onnxruntime":
        from hamseg.apis.onnx_backend import use_onnxruntime

        model = use_onnxruntime(model, args.model, names_from=names_from)
    root = args.inputs[0] if len(args.inputs) == 1 and osp.isdir(args.inputs[0]) else None
    report = segment_images(
        model,
        paths,
        args.out_dir,
        inputs_root=root,
        opacity=args.opacity,
        legend=args.legend,
        save_label=args.save_label,
        progress=not args.no_progress,
        on_failure=lambda _, msg: tqdm.write(f"error: {msg}; skipped", file=sys.stderr),
    )
    print(f"wrote {len(report.written)} overlay(s) to {args.out_dir}")
    failed = len(skipped) + len(report.failed)
    if failed:
        print(f"error: {failed} of {total} inputs skipped (listed above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    run_cli(lambda: sys.exit(main()))
