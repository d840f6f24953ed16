"""Segment images with a trained checkpoint; write mmseg's colour overlays (PNG).

    python tools/infer.py IMAGES|FOLDERS --checkpoint CKPT [--config CFG] [--out-dir D]
    python tools/infer.py $(cat list.txt) --checkpoint CKPT         # a list of images
    python tools/infer.py IMAGES --config CFG --backend onnxruntime --model model.onnx

Writes <name>_overlay.png per input (--save-label: <name>_label.png, the class indices). Exit 0:
all written; 1: some inputs skipped (one line each); 2: nothing run (one line). docs/demo.md,
docs/deploy.md.
"""

import argparse
import os.path as osp
import sys

from tqdm import tqdm

from hamseg.apis import init_model
from hamseg.apis.export import use_onnxruntime
from hamseg.apis.inference import gather_inputs, segment_images
from hamseg.cli import CLIError, run_cli


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("inputs", nargs="+", help="image files or folders (recursive)")
    p.add_argument("--checkpoint", help="trained weights (optional with --backend onnxruntime)")
    p.add_argument("--config", help="config (default: the checkpoint's own)")
    p.add_argument("--out-dir", default="work_dirs/infer", help="where the PNGs go")
    p.add_argument("--opacity", type=float, default=0.5, help="weight of the class colours")
    p.add_argument("--with-labels", action="store_true", help="write class names on the regions")
    p.add_argument("--save-label", action="store_true", help="also write the label maps")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N")
    p.add_argument("--backend", choices=["pytorch", "onnxruntime"], default="pytorch")
    p.add_argument("--model", help="--backend onnxruntime: the exported .onnx")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = p.parse_args()
    if args.backend == "onnxruntime" and not args.model:
        raise CLIError(
            "--backend onnxruntime needs --model FILE.onnx (tools/deploy/export_onnx.py)"
        )
    if args.checkpoint is None and args.backend == "pytorch":
        raise CLIError(
            "--checkpoint is required: the trained weights (only --backend onnxruntime --model "
            "FILE.onnx --config CONFIG runs without them)"
        )
    if args.checkpoint is None and args.config is None:
        raise CLIError("--backend onnxruntime without --checkpoint needs --config CONFIG")
    return args


def main() -> None:
    args = parse_args()
    paths = gather_inputs(args.inputs)
    if not paths:
        raise CLIError("no images found in the inputs")
    model = init_model(args.config, args.checkpoint, args.device)  # no checkpoint: no weights
    if args.backend == "onnxruntime":
        model = use_onnxruntime(model, args.model, args.checkpoint)
    root = args.inputs[0] if len(args.inputs) == 1 and osp.isdir(args.inputs[0]) else None
    results = segment_images(
        model, paths, args.out_dir, root, args.opacity, args.with_labels, args.save_label
    )
    hide = True if args.no_progress or len(paths) < 2 else None  # None: a bar on a terminal only
    skipped = 0
    for _, error in tqdm(results, "infer", len(paths), unit="img", disable=hide):
        if error:  # on its own line above the bar
            tqdm.write(f"error: {error}; skipped", file=sys.stderr)
        skipped += bool(error)
    print(f"wrote {len(paths) - skipped} overlay(s) to {args.out_dir}")
    if skipped:
        print(f"error: {skipped} of {len(paths)} inputs skipped", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    run_cli(main)
