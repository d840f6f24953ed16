"""Run a hamseg .onnx with numpy, OpenCV and ONNX Runtime only (no torch, mmseg or hamseg).

    python tools/deploy/onnx_runner.py MODEL.onnx IMAGES|FOLDERS --out-dir DIR [--threads N]
        [--batch-size N]

Reads the preprocessing from the graph's metadata_props ("hamseg", written by
tools/deploy/export_onnx.py): the test pipeline's resize rule, BGR->RGB, mean/std (or none if
baked into the graph), padding; runs the graph, crops the padding, resizes the logits back to
the image and writes <name>_label.png (class index per pixel) and <name>_overlay.png.
--batch-size N runs up to N consecutive images of the same input size in one call (a graph
exported with --dynamic). Exit 0: all written; 1: some images skipped; 2: nothing run.
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


def fail(message: str) -> None:
    """One line on stderr, exit code 2: nothing was run."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def load(path: str, threads: int = 0) -> tuple[ort.InferenceSession, dict]:
    """The CPU session (``threads`` intra-op threads, 0: ORT's default) and its metadata."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    if "hamseg" not in meta:
        fail(f"{path} has no 'hamseg' metadata: export it with tools/deploy/export_onnx.py")
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


def preprocess(info: dict, bgr: np.ndarray) -> tuple[np.ndarray, tuple[int, int]]:
    """The graph's input (3, H', W') float32 of a BGR uint8 (H, W, 3) image, as mmseg's
    inference: resized, normalised (unless baked), padded; and the resized size (h, w)."""
    h0, w0 = bgr.shape[:2]
    h, w = resized_size(h0, w0, info["resize"])
    img = cv2.resize(bgr, (w, h), interpolation=cv2.INTER_LINEAR) if (h, w) != (h0, w0) else bgr
    baked = info["input"] != "normalised"
    x = img.transpose(2, 0, 1).astype(np.float32)  # (3, H, W)
    if not baked:
        x = x[::-1] if info["bgr_to_rgb"] else x
        mean, std = (np.asarray(info[k], np.float32)[:, None, None] for k in ("mean", "std"))
        x = (x - mean) / std
    size = info["pad"]["size"]
    divisor = info["pad"]["size_divisor"]
    ph, pw = size[::-1] if size else (h, w)  # mmseg's size is (w, h)
    if divisor:
        ph = -(-ph // divisor) * divisor
        pw = -(-pw // divisor) * divisor
    if (ph, pw) != (h, w):  # mmseg pads the normalised image with pad_val (baked: the mean)
        mean = np.asarray(info["mean"], np.float32)[:: -1 if info["bgr_to_rgb"] else 1]
        fill = mean[:, None, None] if baked else np.float32(info["pad_val"])
        x = np.concatenate([x, np.broadcast_to(fill, (3, h, pw - w))], 2)
        x = np.concatenate([x, np.broadcast_to(fill, (3, ph - h, pw))], 1)
    return np.ascontiguousarray(x, np.float32), (h, w)


def label_map(logits: np.ndarray, resized: tuple[int, int], size: tuple[int, int]) -> np.ndarray:
    """Class index (H, W) uint8 of one image's logits (K, H', W'): the padding cropped, resized
    back to the image's ``size`` (bilinear, align_corners=False, as mmseg's postprocess)."""
    h, w = resized
    h0, w0 = size
    logits = logits[:, :h, :w]
    if (h, w) != (h0, w0):
        logits = np.stack([cv2.resize(c, (w0, h0), interpolation=cv2.INTER_LINEAR) for c in logits])
    return logits.argmax(0).astype(np.uint8)


def predict_batch(
    session: ort.InferenceSession, info: dict, images: list[np.ndarray]
) -> list[np.ndarray]:
    """:func:`label_map` of each BGR image; images of one input size go in one run."""
    inputs = [preprocess(info, bgr) for bgr in images]
    groups: dict[tuple, list[int]] = {}
    for i, (x, _) in enumerate(inputs):
        groups.setdefault(x.shape, []).append(i)
    labels: list = [None] * len(images)
    name = session.get_inputs()[0].name
    for members in groups.values():
        # (n, 3, H', W') -> logits (n, K, H', W')
        logits = session.run(None, {name: np.stack([inputs[i][0] for i in members])})[0]
        for i, out in zip(members, logits):
            labels[i] = label_map(out, inputs[i][1], images[i].shape[:2])
    return labels


def predict(session: ort.InferenceSession, info: dict, bgr: np.ndarray) -> np.ndarray:
    """Class index (H, W) uint8 of a BGR uint8 (H, W, 3) image, as mmseg's inference."""
    return predict_batch(session, info, [bgr])[0]


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
    p.add_argument("--batch-size", type=int, default=1, help="images per run (same size)")
    p.add_argument("--opacity", type=float, default=0.5)
    args = p.parse_args()
    if not osp.isfile(args.model):
        fail(f"ONNX model not found: {args.model}")
    if args.batch_size < 1:
        fail(f"--batch-size {args.batch_size}: must be at least 1")
    session, info = load(args.model, args.threads)
    batch = session.get_inputs()[0].shape[0]
    if isinstance(batch, int) and args.batch_size > batch:
        fail(
            f"--batch-size {args.batch_size}: {args.model} takes batches of {batch} only "
            "(exported without --dynamic): use --batch-size 1, or export with --dynamic"
        )
    paths = []
    for item in args.inputs:
        if not osp.isdir(item):
            paths.append(item)
            continue
        paths += [osp.join(item, n) for n in sorted(os.listdir(item)) if n.lower().endswith(EXTS)]
    os.makedirs(args.out_dir, exist_ok=True)
    failed = 0
    for start in range(0, len(paths), args.batch_size):
        chunk = []
        for path in paths[start : start + args.batch_size]:
            bgr = cv2.imread(path, cv2.IMREAD_COLOR)
            if bgr is None:
                print(f"error: {path}: not a readable image; skipped", file=sys.stderr)
                failed += 1
            else:
                chunk.append((path, bgr))
        labels = predict_batch(session, info, [bgr for _, bgr in chunk])
        for (path, bgr), label in zip(chunk, labels):
            stem = osp.join(args.out_dir, osp.splitext(osp.basename(path))[0])
            cv2.imwrite(f"{stem}_label.png", label)
            cv2.imwrite(f"{stem}_overlay.png", overlay(bgr, label, info["palette"], args.opacity))
    print(f"wrote {len(paths) - failed} label map(s) to {args.out_dir}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
