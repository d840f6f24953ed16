"""Generate the Context Shapes demo dataset (seeded, deterministic) in mmseg's folder layout.

    python tools/dataset_converters/generate_context_shapes.py            # data/context_shapes
    python tools/dataset_converters/generate_context_shapes.py --size 96 --num-train 50 \\
        --num-val 10 --out-dir /tmp/cs --seed 1 --preview /tmp/cs.png

docs/demo.md says what the images show and why only global context decides the labels.
"""

import argparse
import os.path as osp

import cv2
import numpy as np

from hamseg.datasets.context_shapes import PALETTE, ContextShapesConfig, generate_context_shapes


def write_preview(root: str, path: str, count: int) -> None:
    """The first ``count`` training images side by side (4 px gaps) above their label maps."""
    rows: list[list[np.ndarray]] = [[], []]
    for name in [f"{i:06d}.png" for i in range(count)]:
        img = cv2.imread(osp.join(root, "img_dir", "train", name))
        label = cv2.imread(osp.join(root, "ann_dir", "train", name), cv2.IMREAD_UNCHANGED)
        gap = np.full((img.shape[0], 4, 3), 255, np.uint8)
        rows[0] += [img, gap]
        rows[1] += [np.asarray(PALETTE, np.uint8)[label][:, :, ::-1], gap]
    top, bottom = (np.concatenate(row[:-1], 1) for row in rows)
    cv2.imwrite(path, np.concatenate([top, np.full((4, top.shape[1], 3), 255, np.uint8), bottom]))


def main() -> None:
    d = ContextShapesConfig()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out-dir", default="data/context_shapes", help="dataset root")
    for name in ("seed", "size", "num_train", "num_val", "min_objects", "max_objects"):
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(d, name))
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--preview", help="also write a PNG of the first training images and labels")
    p.add_argument("--preview-count", type=int, default=6, help="images in the preview")
    args = p.parse_args()
    options = ("size", "num_train", "num_val", "seed", "min_objects", "max_objects")
    cfg = ContextShapesConfig(**{k: getattr(args, k) for k in options})
    if not 1 <= cfg.min_objects <= cfg.max_objects or min(cfg.size, cfg.num_train) < 1:
        p.error("need --size, --num-train >= 1 and 1 <= --min-objects <= --max-objects")
    generate_context_shapes(args.out_dir, cfg, progress=not args.no_progress)
    print(f"wrote {cfg.num_train} train + {cfg.num_val} val images to {args.out_dir}")
    if args.preview:
        write_preview(args.out_dir, args.preview, min(args.preview_count, cfg.num_train))
        print(f"wrote {args.preview}")


if __name__ == "__main__":
    main()
