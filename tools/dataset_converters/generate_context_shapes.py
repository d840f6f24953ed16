"""Generate the Context Shapes demo dataset (seeded, deterministic) in mmseg's folder layout.

    python tools/dataset_converters/generate_context_shapes.py            # data/context_shapes
    python tools/dataset_converters/generate_context_shapes.py --size 96 --num-train 50 \\
        --num-val 10 --out-dir /tmp/cs --seed 1

docs/demo.md says what the images show and why only global context decides the labels.
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack; before anything imports mmseg)

# isort: split
from hamseg.datasets.context_shapes import (  # noqa: E402
    PALETTE,
    ContextShapesConfig,
    generate_context_shapes,
)
from hamseg.datasets.generated import write_preview  # noqa: E402


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
        write_preview(args.out_dir, args.preview, args.preview_count, PALETTE)
        print(f"wrote {args.preview}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
