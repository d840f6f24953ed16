"""PASCAL Context label maps (59 classes + background) in mmseg 1.x's layout, without ``detail``.

Usage (from the repository root; the same command line as mmseg's converter)::

    python tools/dataset_converters/pascal_context.py data/VOCdevkit \\
        data/VOCdevkit/VOC2010/trainval_merged.json

mmseg's converter reads the Detail API's ``trainval_merged.json`` through the ``detail`` package,
which is not on PyPI. This tool needs neither: it reads the per-image label maps of the original
PASCAL Context release (``trainval.tar.gz`` from https://cs.stanford.edu/~roozbeh/pascal-context/,
extracted as ``data/VOCdevkit/VOC2010/trainval/``) and maps them to the 60-class benchmark
(:mod:`hamseg.datasets.converters.pascal_context` explains the mapping and the split). Output,
under ``data/VOCdevkit/VOC2010``: ``SegmentationClassContext/<id>.png`` (uint8, 0..59) and
``ImageSets/SegmentationContext/{train,val}.txt``, as mmseg's converter writes them.

If the release's ``labels.txt`` is found next to the ``trainval`` folder (or given with
``--labels``), the class names at the 59 ids are checked against it before anything is written.
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys
from collections.abc import Sequence
from typing import Optional

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack; before anything imports mmseg)

# isort: split
from hamseg.cli import run_cli  # noqa: E402
from hamseg.datasets.converters.pascal_context import convert_pascal_context  # noqa: E402


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="PASCAL Context label maps (59 classes + background) in mmseg's layout"
    )
    parser.add_argument("devkit_path", help="VOCdevkit folder holding VOC2010/")
    parser.add_argument(
        "json_path",
        help="Detail trainval_merged.json (only its train/val split is read, if it exists); "
        "the .mat folder is looked for next to it as trainval/",
    )
    parser.add_argument(
        "-o", "--out_dir", help="PNG folder (default: <devkit>/VOC2010/SegmentationClassContext)"
    )
    parser.add_argument("--mat-dir", help="folder of the Context release's <id>.mat files")
    parser.add_argument("--labels", help="the release's labels.txt, to check the class ids")
    parser.add_argument("--no-label-check", action="store_true", help="skip the labels.txt check")
    parser.add_argument("--nproc", type=int, default=1, help="worker processes")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    res = convert_pascal_context(
        args.devkit_path,
        args.json_path,
        out_dir=args.out_dir,
        mat_dir=args.mat_dir,
        labels=args.labels,
        label_check=not args.no_label_check,
        nproc=args.nproc,
    )
    if res.labels_checked:
        print(f"class ids checked against {res.labels_checked}")
    for name, missing in res.missing.items():
        if missing:
            print(
                f"warning: {len(missing)} {name} images of {res.source} have no .mat in "
                f"{res.mat_dir}, e.g. {missing[:3]}; they are left out",
                file=sys.stderr,
            )
    train, val = len(res.splits["train"]), len(res.splits["val"])
    print(
        f"{train + val} PNGs in {res.out_dir}; train {train}, val {val} "
        f"images (split from {res.source}; the full data give 4998 / 5105)."
    )
    return 0


if __name__ == "__main__":
    run_cli(lambda: sys.exit(main()))
