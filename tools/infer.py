"""Segment images with a trained checkpoint; write colour overlays with a legend (PNG).

    python tools/infer.py IMAGES|FOLDERS|LIST.txt --checkpoint CKPT [--config CFG] [--out-dir D]
    python tools/infer.py IMAGES --config CFG --backend onnxruntime --model model.onnx

Writes <name>_overlay.png per input (--save-label: <name>_label.png). Exit 0: all written; 1:
some inputs skipped (one line each); 2: nothing run (one line). docs/demo.md, docs/deploy.md.
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from hamseg.apis import init_model  # noqa: E402
from hamseg.apis.export import check_trained_head as check_checkpoint  # noqa: E402
from hamseg.apis.export import use_onnxruntime  # noqa: E402
from hamseg.cli import CLIError, run_cli  # noqa: E402
from hamseg.utils.errors import require_file  # noqa: E402
from tools.lib.images import gather_inputs, segment_images  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("inputs", nargs="+", help="image files, folders or .txt lists of paths")
    p.add_argument("--checkpoint", help="trained weights (optional with --backend onnxruntime)")
    p.add_argument("--config", default=None, help="config (default: the checkpoint's own)")
    p.add_argument("--out-dir", default="work_dirs/infer", help="where the PNGs go")
    p.add_argument("--opacity", type=float, default=0.5, help="weight of the class colours")
    p.add_argument("--legend", choices=["present", "all"], default="present")
    p.add_argument("--save-label", action="store_true", help="also write raw label maps")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N")
    p.add_argument("--backend", choices=["pytorch", "onnxruntime"], default="pytorch")
    p.add_argument("--model", help="--backend onnxruntime: the exported .onnx")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = p.parse_args(argv)
    if args.backend == "onnxruntime" and not args.model:
        raise CLIError(
            "--backend onnxruntime needs --model FILE.onnx (tools/deploy/export_onnx.py)"
        )
    if args.checkpoint is None and args.backend == "pytorch":
        raise CLIError(
            "--checkpoint CHECKPOINT is required: the trained weights (only --backend "
            "onnxruntime --model FILE.onnx --config CONFIG runs without them)"
        )
    if args.checkpoint is None and args.config is None:
        raise CLIError(
            "--backend onnxruntime without --checkpoint needs --config CONFIG: the test "
            "pipeline, class names and palette come from it"
        )
    return args


def main(argv: list[str] | None = None) -> int:
    from tqdm import tqdm

    args = parse_args(argv)
    paths, skipped = gather_inputs(args.inputs)
    if not paths and not skipped:
        raise CLIError("no images found in the inputs")
    if args.backend == "onnxruntime":
        require_file(args.model, "ONNX model")
    for _, message in skipped:
        print(f"error: {message}; skipped", file=sys.stderr)
    model = init_model(args.config, args.checkpoint, args.device)  # no checkpoint: no weights
    if args.backend == "onnxruntime":
        if args.checkpoint and args.config:
            check_checkpoint(model.cfg, args.checkpoint, "pass the config it was trained with")
        names_from = ("checkpoint", args.checkpoint) if args.checkpoint else ("config", args.config)
        model = use_onnxruntime(model, args.model, names_from=names_from)
    root = args.inputs[0] if len(args.inputs) == 1 and osp.isdir(args.inputs[0]) else None
    report = segment_images(
        model,
        paths,
        args.out_dir,
        root,
        args.opacity,
        args.legend,
        args.save_label,
        progress=not args.no_progress,
        on_failure=lambda _, msg: tqdm.write(f"error: {msg}; skipped", file=sys.stderr),
    )
    print(f"wrote {len(report.written)} overlay(s) to {args.out_dir}")
    failed = len(skipped) + len(report.failed)
    if failed:
        total = len(paths) + len(skipped)
        print(f"error: {failed} of {total} inputs skipped (listed above)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    run_cli(lambda: sys.exit(main()))
