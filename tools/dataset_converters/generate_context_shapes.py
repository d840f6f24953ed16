"""Generate the Context Shapes demo dataset (seeded, deterministic) in mmseg's folder layout.

    python tools/dataset_converters/generate_context_shapes.py            # data/context_shapes
    python tools/dataset_converters/generate_context_shapes.py --size 96 --num-train 50 \\
        --num-val 10 --out-dir /tmp/cs --seed 1

docs/demo.md says what the images show and why only global context decides the labels.
"""

from __future__ import annotations

import argparse
import os
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack; before anything imports mmseg)

# isort: split
import cv2  # noqa: E402
import numpy as np  # noqa: E402

from hamseg.datasets.context_shapes import (  # noqa: E402
    PALETTE,
    ContextShapesConfig,
    generate_context_shapes,
)


def write_preview(out_dir: str, path: str, count: int) -> None:
    """A PNG montage: the first ``count`` training images above their label maps in colour."""
    palette = np.asarray(PALETTE, np.uint8)
    tops, bottoms = [], []
    for i in range(count):
        name = f"{i:06d}.png"
        img = cv2.imread(osp.join(out_dir, "img_dir", "train", name), cv2.IMREAD_COLOR)
        if img is None:
            break
        label = cv2.imread(osp.join(out_dir, "ann_dir", "train", name), cv2.IMREAD_UNCHANGED)
        gap = np.full((img.shape[0], 4, 3), 255, np.uint8)
        tops += [img, gap]
        bottoms += [np.ascontiguousarray(palette[label][:, :, ::-1]), gap]
    top, bottom = np.concatenate(tops[:-1], 1), np.concatenate(bottoms[:-1], 1)
    sep = np.full((4, top.shape[1], 3), 255, np.uint8)
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    cv2.imwrite(path, np.concatenate([top, sep, bottom], 0))


def main(argv: list[str] | None = None) -> int:
    d = ContextShapesConfig()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out-dir", default="data/context_shapes", help="dataset root")
    p.add_argument("--seed", type=int, default=d.seed, help="dataset seed")
    p.add_argument("--size", type=int, default=d.size, help="image side in pixels")
    p.add_argument("--num-train", type=int, default=d.num_train, help="training images")
    p.add_argument("--num-val", type=int, default=d.num_val, help="validation images")
    p.add_argument("--min-objects", type=int, default=d.min_objects)
    p.add_argument("--max-objects", type=int, default=d.max_objects)
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--preview", help="also write a PNG of the first training images and labels")
    p.add_argument("--preview-count", type=int, default=6, help="images in the preview")
    args = p.parse_args(argv)
    options = ("size", "num_train", "num_val", "seed", "min_objects", "max_objects")
    cfg = ContextShapesConfig(**{k: getattr(args, k) for k in options})
    generate_context_shapes(args.out_dir, cfg, progress=not args.no_progress)
    print(f"wrote {cfg.num_train} train + {cfg.num_val} val images to {args.out_dir}")
    if args.preview:
        write_preview(args.out_dir, args.preview, args.preview_count)
        print(f"wrote {args.preview}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
