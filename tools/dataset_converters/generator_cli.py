"""The command line of the demo tasks' generators (tools/dataset_converters/generate_*.py) and
their ``--preview`` montage."""

from __future__ import annotations

import argparse
import os
import os.path as osp
from collections.abc import Sequence
from typing import Any, Callable, Optional

import cv2
import numpy as np


def write_preview(out_dir: str, path: str, count: int, palette: list[list[int]]) -> None:
    """A PNG montage: the first ``count`` training images of ``out_dir`` above their label maps
    in the colours of ``palette``."""
    colours = np.asarray(palette, np.uint8)
    tops = []
    bottoms = []
    for i in range(count):
        name = f"{i:06d}.png"
        img = cv2.imread(osp.join(out_dir, "img_dir", "train", name), cv2.IMREAD_COLOR)
        if img is None:
            break
        label = cv2.imread(osp.join(out_dir, "ann_dir", "train", name), cv2.IMREAD_UNCHANGED)
        gap = np.full((img.shape[0], 4, 3), 255, np.uint8)
        tops += [img, gap]
        bottoms += [np.ascontiguousarray(colours[label][:, :, ::-1]), gap]
    top = np.concatenate(tops[:-1], 1)
    bottom = np.concatenate(bottoms[:-1], 1)
    sep = np.full((4, top.shape[1], 3), 255, np.uint8)
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    cv2.imwrite(path, np.concatenate([top, sep, bottom], 0))


def generate_main(
    argv: Optional[Sequence[str]],
    description: str,
    config_cls: type,
    generate: Callable[..., Any],
    palette: list[list[int]],
    default_out: str,
    int_options: Sequence[str] = (),
) -> int:
    """Parse ``--out-dir --seed --size --num-train --num-val`` (and ``int_options``, fields of
    ``config_cls``), write the dataset with ``generate(out_dir, cfg, progress)`` and, with
    ``--preview``, a montage of the first training images and their labels."""
    d = config_cls()
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--out-dir", default=default_out, help="dataset root")
    p.add_argument("--seed", type=int, default=d.seed, help="dataset seed")
    p.add_argument("--size", type=int, default=d.size, help="image side in pixels")
    p.add_argument("--num-train", type=int, default=d.num_train, help="training images")
    p.add_argument("--num-val", type=int, default=d.num_val, help="validation images")
    for name in int_options:
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(d, name))
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--preview", help="also write a PNG of the first training images and labels")
    p.add_argument("--preview-count", type=int, default=6, help="images in the preview")
    args = p.parse_args(argv)
    options = ("size", "num_train", "num_val", "seed", *int_options)
    cfg = config_cls(**{k: getattr(args, k) for k in options})
    generate(args.out_dir, cfg, progress=not args.no_progress)
    print(f"wrote {cfg.num_train} train + {cfg.num_val} val images to {args.out_dir}")
    if args.preview:
        write_preview(args.out_dir, args.preview, args.preview_count, palette)
        print(f"wrote {args.preview}")
    return 0
