"""Run a hamseg .onnx with numpy, OpenCV and ONNX Runtime only (no torch, mmseg or hamseg).

    python tools/deploy/onnx_runner.py MODEL.onnx IMAGES|FOLDERS --out-dir DIR [--threads N]
        [--batch-size N] [--provider cpu|cuda|tensorrt] [--slide] [--save-logits]

Does around the graph what mmseg's inference does, as its metadata says (resize, normalise,
pad; whole or slide inference: the config's test_cfg or --slide); writes <name>_label.png (class
indices), <name>_overlay.png. A static graph gets other sizes resized to its own (docs/deploy.md).
Exit 0: all written; 1: some images skipped; 2: nothing run (one line).
"""

import argparse
import json
import os
import os.path as osp
import sys

import cv2
import numpy as np
import onnxruntime as ort

EXTS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")
PROVIDERS = {"cpu": "CPU", "cuda": "CUDA", "tensorrt": "Tensorrt"}  # + "ExecutionProvider"
FAST_INT8 = ("avx512_vnni", "avx_vnni", "amx_int8")  # x86 flags of int8 dot products


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def resize(x: np.ndarray, h: int, w: int) -> np.ndarray:
    """(C, H, W) float32 resized bilinearly, half-pixel centres (mmseg's align_corners=False)."""
    return np.stack([cv2.resize(c, (w, h), interpolation=cv2.INTER_LINEAR) for c in x])


def preprocess(info: dict, bgr: np.ndarray) -> tuple[np.ndarray, tuple[int, int]]:
    """The graph's input (3, H', W') of a BGR uint8 image as mmseg's inference makes it (resized,
    normalised unless baked, padded), and the resized size (h, w)."""
    h, w = bgr.shape[:2]
    rule = info["resize"] or {}
    if rule.get("scale"):  # mmcv's Resize: scale (w, h); keep_ratio as mmcv.imrescale
        sw, sh = rule["scale"]
        f = min(max(sw, sh) / max(h, w), min(sw, sh) / min(h, w))
        h, w = (int(h * f + 0.5), int(w * f + 0.5)) if rule.get("keep_ratio") else (sh, sw)
        bgr = cv2.resize(bgr, (w, h), interpolation=cv2.INTER_LINEAR)
    x = bgr.transpose(2, 0, 1).astype(np.float32)
    mean = np.asarray(info["mean"], np.float32)[:, None, None]
    if info["input"] == "normalised":
        x = (x[::-1] if info["bgr_to_rgb"] else x) - mean
        x, fill = x / np.asarray(info["std"], np.float32)[:, None, None], info["pad_val"]
    else:  # mmseg pads the normalised image with pad_val: the raw image with the mean
        fill = mean[::-1] if info["bgr_to_rgb"] else mean
    ph, pw = (info["pad"]["size"] or (w, h))[::-1]
    if divisor := info["pad"]["size_divisor"]:
        ph, pw = -(-ph // divisor) * divisor, -(-pw // divisor) * divisor
    padded = np.pad(x - fill, ((0, 0), (0, max(ph - h, 0)), (0, max(pw - w, 0)))) + fill
    return padded.astype(np.float32), (h, w)


def run_graph(session: ort.InferenceSession, x: np.ndarray) -> np.ndarray:
    """Logits (n, K, H, W) of (n, 3, H, W); a static graph's other sizes resized to its own."""
    batch, _, *size = session.get_inputs()[0].shape
    if isinstance(batch, int) and len(x) > batch:  # a static graph: one image per run
        return np.concatenate([run_graph(session, x[i : i + 1]) for i in range(len(x))])
    fit = all(isinstance(v, int) for v in size) and tuple(size) != x.shape[2:]
    feed = np.stack([resize(i, *size) for i in x]) if fit else x
    logits = session.run(None, {session.get_inputs()[0].name: feed})[0]
    return np.stack([resize(i, *x.shape[2:]) for i in logits]) if fit else logits


def slide(session: ort.InferenceSession, x: np.ndarray, crop: list, stride: list) -> np.ndarray:
    """mmseg's EncoderDecoder.slide_inference: overlapping crops' logits over their count."""
    (hc, wc), (hs, ws), (h, w) = crop, stride, x.shape[2:]
    preds, count = 0.0, np.zeros((h, w), np.float32)
    for i in range(max(h - hc + hs - 1, 0) // hs + 1):
        for j in range(max(w - wc + ws - 1, 0) // ws + 1):
            y2, x2 = min(i * hs + hc, h), min(j * ws + wc, w)
            y1, x1 = max(y2 - hc, 0), max(x2 - wc, 0)
            part = run_graph(session, np.ascontiguousarray(x[:, :, y1:y2, x1:x2]))
            preds = preds + np.pad(part, ((0, 0), (0, 0), (y1, h - y2), (x1, w - x2)))
            count[y1:y2, x1:x2] += 1
    return preds / count


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("model")
    p.add_argument("inputs", nargs="+", help="image files or folders")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0: ORT's)")
    p.add_argument("--batch-size", type=int, default=1, help="images per run (same size)")
    p.add_argument("--provider", choices=list(PROVIDERS), default="cpu")
    p.add_argument("--slide", action="store_true", help="slide inference (crops of the graph)")
    p.add_argument("--save-logits", action="store_true", help="also <name>_logits.npy (K, H, W)")
    args = p.parse_args()
    provider = PROVIDERS[args.provider] + "ExecutionProvider"
    if not osp.isfile(args.model):
        fail(f"ONNX model not found: {args.model}")
    if provider not in ort.get_available_providers():
        have = ", ".join(ort.get_available_providers())
        fail(f"--provider {args.provider}: this onnxruntime has no {provider} (only {have})")
    (options := ort.SessionOptions()).intra_op_num_threads = args.threads
    session = ort.InferenceSession(args.model, options, providers=[provider])
    meta = session.get_modelmeta().custom_metadata_map
    if "hamseg" not in meta:
        fail(f"{args.model} has no 'hamseg' metadata: export it with tools/deploy/export_onnx.py")
    info = json.loads(meta["hamseg"])
    test_cfg = info.get("test_cfg") or {}
    sliding = args.slide or test_cfg.get("mode") == "slide"
    crop = [v if isinstance(v, int) else 0 for v in session.get_inputs()[0].shape[2:]]
    crop = test_cfg.get("crop_size") or crop
    if sliding and not all(crop):
        fail(f"--slide: {args.model} takes any size and its config names no crop_size")
    stride = test_cfg.get("stride") or [max(1, v * 2 // 3) for v in crop]
    cpu = open("/proc/cpuinfo").read().split() if osp.isfile("/proc/cpuinfo") else FAST_INT8
    if meta.get("precision") == "int8" and args.provider == "cpu" and not set(FAST_INT8) & set(cpu):
        print(
            "note: int8 on a CPU without VNNI/AMX may gain little (docs/deploy.md)", file=sys.stderr
        )
    paths = []
    for item in args.inputs:
        found = sorted(osp.join(item, n) for n in os.listdir(item)) if osp.isdir(item) else [item]
        paths += [f for f in found if not osp.isdir(item) or f.lower().endswith(EXTS)]
    os.makedirs(args.out_dir, exist_ok=True)
    images = [(path, cv2.imread(path, cv2.IMREAD_COLOR)) for path in paths]
    for path in (path for path, bgr in images if bgr is None):
        print(f"error: {path}: not a readable image; skipped", file=sys.stderr)
    images = [(path, bgr, *preprocess(info, bgr)) for path, bgr in images if bgr is not None]
    for start in range(0, len(images), args.batch_size):  # one run per input size
        chunk = images[start : start + args.batch_size]
        for shape in dict.fromkeys(c[2].shape for c in chunk):
            group = [c for c in chunk if c[2].shape == shape]
            x = np.stack([c[2] for c in group])
            logits = slide(session, x, crop, stride) if sliding else run_graph(session, x)
            for (path, bgr, _, (h, w)), out in zip(group, logits):
                out = resize(out[:, :h, :w], *bgr.shape[:2])
                label = out.argmax(0).astype(np.uint8)
                stem = osp.join(args.out_dir, osp.splitext(osp.basename(path))[0])
                cv2.imwrite(f"{stem}_label.png", label)
                colours = np.asarray(info["palette"], np.float32)[label][..., ::-1]
                cv2.imwrite(f"{stem}_overlay.png", np.round((bgr + colours) / 2).astype(np.uint8))
                if args.save_logits:
                    np.save(f"{stem}_logits.npy", out.astype(np.float32))
    print(f"wrote {len(images)} label map(s) to {args.out_dir}")
    return 1 if len(images) < len(paths) else 0


if __name__ == "__main__":
    sys.exit(main())
