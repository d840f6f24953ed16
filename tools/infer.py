"""Segment images with a trained checkpoint and write colour overlays with a legend (PNG).

Usage::

    python tools/infer.py IMAGE [IMAGE ...] --checkpoint CKPT [--config CFG] [--out-dir DIR]
    python tools/infer.py path/to/folder   --checkpoint work_dirs/demo/.../iter_400.pth
    python tools/infer.py images.txt       --checkpoint CKPT      # a text file, one path a line

Inputs may be image files, folders (searched recursively for image files) or ``.txt`` lists. Any
size works, and grayscale, RGBA (composited over white) and 16-bit images are converted to 8-bit
RGB first. The config defaults to the one stored in the checkpoint (mmengine saves it). For each
input ``<name>.<ext>`` the output folder gets ``<name>_overlay.png``: the image with the
predicted classes painted over it, and a legend of the classes present (``--legend all`` lists
every class). ``--save-label`` also writes the raw label map ``<name>_label.png``.
"""

from __future__ import annotations

import argparse
import os
import os.path as osp
import sys
from collections.abc import Sequence
from typing import Optional

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
import cv2  # noqa: E402
import numpy as np  # noqa: E402
from mmengine.config import Config  # noqa: E402

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm")


def collect_inputs(inputs: Sequence[str]) -> list[str]:
    """Expand files, folders (recursive, sorted) and ``.txt`` lists into image paths.

    Raises:
        FileNotFoundError: If an input, or a path listed in a ``.txt`` file, does not exist.
    """
    paths: list[str] = []
    for item in inputs:
        if osp.isdir(item):
            found = []
            for root, _, files in os.walk(item):
                found += [osp.join(root, f) for f in files if f.lower().endswith(IMAGE_EXTENSIONS)]
            paths += sorted(found)
        elif item.lower().endswith(".txt"):
            if not osp.isfile(item):
                raise FileNotFoundError(f"image list not found: {item}")
            base = osp.dirname(item)
            with open(item, encoding="utf-8") as f:
                for line in f:
                    line = line.strip()
                    if not line or line.startswith("#"):
                        continue
                    path = line if osp.isabs(line) or osp.exists(line) else osp.join(base, line)
                    if not osp.isfile(path):
                        raise FileNotFoundError(f"image listed in {item} not found: {line}")
                    paths.append(path)
        elif osp.isfile(item):
            paths.append(item)
        else:
            raise FileNotFoundError(f"input not found: {item}")
    return paths


def read_image_rgb(path: str) -> np.ndarray:
    """Read any common image as 8-bit RGB (H, W, 3).

    Grayscale is replicated to three channels, an alpha channel is composited over white, and
    16-bit or float images are rescaled to 0..255.

    Raises:
        ValueError: If the file cannot be decoded as an image.
    """
    img = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if img is None:
        raise ValueError(f"cannot read image: {path}")
    if img.dtype != np.uint8:
        img = img.astype(np.float64)
        hi = 65535.0 if img.max() > 255 else (1.0 if img.max() <= 1.0 else 255.0)
        img = np.clip(img / hi * 255.0, 0, 255).astype(np.uint8)
    if img.ndim == 2:
        return np.repeat(img[:, :, None], 3, axis=2)
    if img.shape[2] == 1:
        return np.repeat(img, 3, axis=2)
    if img.shape[2] == 4:
        alpha = img[:, :, 3:4].astype(np.float32) / 255.0
        bgr = img[:, :, :3].astype(np.float32) * alpha + 255.0 * (1.0 - alpha)
        img = np.round(bgr).astype(np.uint8)
    return cv2.cvtColor(img[:, :, :3], cv2.COLOR_BGR2RGB)


def draw_overlay(
    img: np.ndarray,
    label: np.ndarray,
    classes: Sequence[str],
    palette: Sequence[Sequence[int]],
    opacity: float = 0.5,
    legend: str = "present",
) -> np.ndarray:
    """Blend the label colours over the image and add a legend panel on the right.

    Args:
        img: RGB uint8 (H, W, 3).
        label: Class indices (H, W); values outside the palette are left unpainted.
        classes: Class names.
        palette: RGB colour of each class.
        opacity: Weight of the label colours.
        legend: 'present' (classes in ``label``, largest first) or 'all'.

    Returns:
        RGB uint8 image (max(H, legend height), W + legend width, 3).
    """
    h, w = label.shape
    colours = np.asarray(palette, np.float32)
    valid = label < len(colours)
    out = img.astype(np.float32)
    painted = colours[np.where(valid, label, 0)]
    out[valid] = (1 - opacity) * out[valid] + opacity * painted[valid]
    out = np.clip(np.round(out), 0, 255).astype(np.uint8)

    if legend == "all":
        shown = list(range(len(classes)))
    else:
        ids, counts = np.unique(label[valid], return_counts=True)
        shown = [int(i) for i in ids[np.argsort(-counts, kind="stable")]]
    font, scale, thick = cv2.FONT_HERSHEY_SIMPLEX, 0.45, 1
    row = 20
    text_w = max([cv2.getTextSize(str(classes[i]), font, scale, thick)[0][0] for i in shown] + [60])
    panel_w = 8 + 14 + 6 + text_w + 8
    panel_h = max(h, 8 + row * max(1, len(shown)) + 4)
    panel = np.full((panel_h, panel_w, 3), 255, np.uint8)
    if not shown:
        cv2.putText(panel, "(no class)", (8, 22), font, scale, (0, 0, 0), thick, cv2.LINE_AA)
    for k, i in enumerate(shown):
        y = 8 + k * row
        colour = tuple(int(c) for c in palette[i])
        cv2.rectangle(panel, (8, y), (8 + 14, y + 14), colour, thickness=-1)
        cv2.rectangle(panel, (8, y), (8 + 14, y + 14), (0, 0, 0), thickness=1)
        cv2.putText(
            panel, str(classes[i]), (28, y + 12), font, scale, (0, 0, 0), thick, cv2.LINE_AA
        )
    canvas = np.full((panel_h, w + panel_w, 3), 255, np.uint8)
    canvas[:h, :w] = out
    canvas[:, w:] = panel
    return canvas


def load_model(checkpoint: str, config: Optional[str] = None, device: str = "cpu"):
    """Build the segmentor of ``checkpoint`` (config from ``config`` or the checkpoint's meta).

    Raises:
        FileNotFoundError: If the checkpoint does not exist.
        ValueError: If no config is given and the checkpoint carries none.
    """
    from mmseg.apis import init_model

    if not osp.isfile(checkpoint):
        raise FileNotFoundError(f"checkpoint not found: {checkpoint}")
    if config is None:
        from hamseg.compat.checkpoint import load_checkpoint_file

        meta = load_checkpoint_file(checkpoint, map_location="cpu").get("meta", {})
        if "cfg" not in meta:
            raise ValueError(f"{checkpoint} stores no config: pass --config")
        cfg = Config.fromstring(meta["cfg"], file_format=".py")
    else:
        cfg = Config.fromfile(config)
    return init_model(cfg, checkpoint, device=device)


def class_info(model) -> tuple[list[str], list[list[int]]]:
    """Class names and palette of a model (from the checkpoint; a generated palette if absent)."""
    meta = getattr(model, "dataset_meta", None) or {}
    n = model.decode_head.num_classes
    classes = list(meta.get("classes") or [f"class {i}" for i in range(n)])
    palette = meta.get("palette")
    if not palette or len(palette) < len(classes):
        rng = np.random.default_rng(42)
        palette = rng.integers(0, 256, size=(len(classes), 3)).tolist()
    return classes, [list(map(int, c)) for c in palette]


def output_name(path: str, inputs_root: Optional[str]) -> str:
    """Output stem: the path relative to its input folder (separators -> '__'), else the name."""
    rel = osp.relpath(path, inputs_root) if inputs_root else osp.basename(path)
    stem = osp.splitext(rel)[0]
    return stem.replace(os.sep, "__")


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("inputs", nargs="+", help="image files, folders or .txt lists of paths")
    p.add_argument("--checkpoint", required=True, help="checkpoint (.pth) of a trained model")
    p.add_argument("--config", default=None, help="config (default: the checkpoint's own)")
    p.add_argument("--out-dir", default="work_dirs/infer", help="where the PNGs go")
    p.add_argument("--opacity", type=float, default=0.5, help="weight of the class colours")
    p.add_argument("--legend", choices=["present", "all"], default="present")
    p.add_argument("--save-label", action="store_true", help="also write raw label maps")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    """Run inference on every input; returns the exit code."""
    from mmseg.apis import inference_model
    from tqdm import tqdm

    args = parse_args(argv)
    paths = collect_inputs(args.inputs)
    if not paths:
        print("error: no images found in the inputs", file=sys.stderr)
        return 2
    model = load_model(args.checkpoint, args.config, args.device)
    classes, palette = class_info(model)
    os.makedirs(args.out_dir, exist_ok=True)
    root = args.inputs[0] if len(args.inputs) == 1 and osp.isdir(args.inputs[0]) else None
    show_bar = not args.no_progress and len(paths) > 1
    written = []
    for path in tqdm(paths, desc="infer", unit="img", disable=not show_bar):
        img = read_image_rgb(path)
        # mmseg's pipelines take BGR arrays, like images read by cv2.
        result = inference_model(model, np.ascontiguousarray(img[:, :, ::-1]))
        label = result.pred_sem_seg.data[0].cpu().numpy().astype(np.int64)
        canvas = draw_overlay(img, label, classes, palette, args.opacity, args.legend)
        stem = output_name(path, root)
        out_path = osp.join(args.out_dir, f"{stem}_overlay.png")
        cv2.imwrite(out_path, cv2.cvtColor(canvas, cv2.COLOR_RGB2BGR))
        if args.save_label:
            cv2.imwrite(osp.join(args.out_dir, f"{stem}_label.png"), label.astype(np.uint8))
        written.append(out_path)
    print(f"wrote {len(written)} overlay(s) to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
