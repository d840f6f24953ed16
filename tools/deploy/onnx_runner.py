"""Run a hamseg .onnx with numpy, OpenCV and ONNX Runtime only (no torch, mmseg or hamseg).

    python tools/deploy/onnx_runner.py MODEL.onnx IMAGES|FOLDERS --out-dir DIR [--threads N]

Reads the preprocessing from the graph's metadata_props ("hamseg", written by
tools/deploy/export_onnx.py): the test pipeline's resize rule, BGR->RGB, mean/std (or none if
baked into the graph), padding; runs the graph, crops the padding, resizes the logits back to
the image and writes <name>_label.png (class index per pixel) and <name>_overlay.png.
"""

from __future__ import annotations

import argparse
import json
import os
import os.path as osp
import sys

import cv2
import numpy as np
import onnxruntime as ort

EXTS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")


def load(path: str, threads: int = 0) -> tuple[ort.InferenceSession, dict]:
    """The CPU session (``threads`` intra-op threads, 0: ORT's default) and its metadata."""
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    if "hamseg" not in meta:
        sys.exit(f"error: {path} has no 'hamseg' metadata: export it with export_onnx.py")
    return session, json.loads(meta["hamseg"])


def resized_size(h: int, w: int, resize: dict | None) -> tuple[int, int]:
    """(h, w) after mmcv's Resize: ``scale`` (w, h), kept ratio as ``mmcv.imrescale``."""
    if not resize or not resize.get("scale"):
        return h, w
    sw, sh = resize["scale"]
    if not resize.get("keep_ratio"):
        return sh, sw
    factor = min(max(sw, sh) / max(h, w), min(sw, sh) / min(h, w))
    return int(h * factor + 0.5), int(w * factor + 0.5)


def predict(session: ort.InferenceSession, info: dict, bgr: np.ndarray) -> np.ndarray:
    """Class index (H, W) uint8 of a BGR uint8 (H, W, 3) image, as mmseg's inference."""
    h0, w0 = bgr.shape[:2]
    h, w = resized_size(h0, w0, info["resize"])
    img = cv2.resize(bgr, (w, h), interpolation=cv2.INTER_LINEAR) if (h, w) != (h0, w0) else bgr
    baked = info["input"] != "normalised"
    x = img.transpose(2, 0, 1).astype(np.float32)  # (3, H, W)
    if not baked:
        x = x[::-1] if info["bgr_to_rgb"] else x
        mean, std = (np.asarray(info[k], np.float32)[:, None, None] for k in ("mean", "std"))
        x = (x - mean) / std
    size, divisor = info["pad"]["size"], info["pad"]["size_divisor"]
    ph, pw = size[::-1] if size else (h, w)  # mmseg's size is (w, h)
    if divisor:
        ph, pw = -(-ph // divisor) * divisor, -(-pw // divisor) * divisor
    if (ph, pw) != (h, w):  # mmseg pads the normalised image with pad_val (baked: the mean)
        mean = np.asarray(info["mean"], np.float32)[:: -1 if info["bgr_to_rgb"] else 1]
        fill = mean[:, None, None] if baked else np.float32(info["pad_val"])
        x = np.concatenate([x, np.broadcast_to(fill, (3, h, pw - w))], 2)
        x = np.concatenate([x, np.broadcast_to(fill, (3, ph - h, pw))], 1).astype(np.float32)
    logits = session.run(None, {session.get_inputs()[0].name: x[None].copy()})[0][0, :, :h, :w]
    if (h, w) != (h0, w0):  # bilinear, align_corners=False, as mmseg's postprocess_result
        logits = np.stack([cv2.resize(c, (w0, h0), interpolation=cv2.INTER_LINEAR) for c in logits])
    return logits.argmax(0).astype(np.uint8)


def overlay(bgr: np.ndarray, label: np.ndarray, palette: list, opacity: float) -> np.ndarray:
    """The class colours (RGB palette) blended over the BGR image."""
    colours = np.asarray(palette, np.float32)[:, ::-1]
    out = (1 - opacity) * bgr.astype(np.float32) + opacity * colours[label]
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("model")
    p.add_argument("inputs", nargs="+", help="image files or folders")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0: ORT's default)")
    p.add_argument("--opacity", type=float, default=0.5)
    args = p.parse_args()
    if not osp.isfile(args.model):
        sys.exit(f"error: ONNX model not found: {args.model}")
    session, info = load(args.model, args.threads)
    paths = []
    for item in args.inputs:
        if not osp.isdir(item):
            paths.append(item)
            continue
        paths += [osp.join(item, n) for n in sorted(os.listdir(item)) if n.lower().endswith(EXTS)]
    os.makedirs(args.out_dir, exist_ok=True)
    failed = 0
    for path in paths:
        bgr = cv2.imread(path, cv2.IMREAD_COLOR)
        if bgr is None:
            print(f"error: {path}: not a readable image; skipped", file=sys.stderr)
            failed += 1
            continue
        label = predict(session, info, bgr)
        stem = osp.join(args.out_dir, osp.splitext(osp.basename(path))[0])
        cv2.imwrite(f"{stem}_label.png", label)
        cv2.imwrite(f"{stem}_overlay.png", overlay(bgr, label, info["palette"], args.opacity))
    print(f"wrote {len(paths) - failed} label map(s) to {args.out_dir}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
