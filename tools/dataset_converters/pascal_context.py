"""PASCAL Context label maps (59 classes + background) in mmseg 1.x's layout, without ``detail``.

    python tools/dataset_converters/pascal_context.py data/VOCdevkit \\
        data/VOCdevkit/VOC2010/trainval_merged.json

mmseg's command line, but it reads the release's per-image ``.mat`` label maps (``trainval.tar.gz``
extracted as ``data/VOCdevkit/VOC2010/trainval/``) instead of the Detail API, which is not on PyPI.
Writes ``SegmentationClassContext/<id>.png`` (0..59) and ``ImageSets/SegmentationContext/
{train,val}.txt`` under VOC2010; the class ids are checked against the release's ``labels.txt``
if found (data/README.md).
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack; before anything imports mmseg)

# isort: split
from hamseg.cli import run_cli  # noqa: E402
from tools.dataset_converters.converters import convert_pascal_context  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="PASCAL Context label maps in mmseg's layout")
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
    args = parser.parse_args(argv)
    res = convert_pascal_context(
        args.devkit_path,
        args.json_path,
        args.out_dir,
        args.mat_dir,
        args.labels,
        not args.no_label_check,
        args.nproc,
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
    train = len(res.splits["train"])
    val = len(res.splits["val"])
    print(
        f"{train + val} PNGs in {res.out_dir}; train {train}, val {val} "
        f"images (split from {res.source}; the full data give 4998 / 5105)."
    )
    return 0


if __name__ == "__main__":
    run_cli(lambda: sys.exit(main()))
