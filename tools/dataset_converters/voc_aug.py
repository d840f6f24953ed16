"""Build PASCAL VOC 2012 "trainaug" (10,582 images) from the SBD release, in mmseg 1.x's layout.

Usage (from the repository root; data/README.md shows the downloads and the resulting tree)::

    python tools/dataset_converters/voc_aug.py data/VOCdevkit data/VOCdevkit/VOCaug

``data/VOCdevkit/VOCaug`` is the extracted SBD release (``benchmark_RELEASE``). The tool writes
``SegmentationClassAug/<id>.png`` and ``ImageSets/Segmentation/{aug,trainaug}.txt`` into
``data/VOCdevkit/VOC2012``; :mod:`hamseg.datasets.converters.voc_aug` says what each holds.
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
from hamseg.datasets.converters.voc_aug import (  # noqa: E402
    TRAINAUG_LEN,
    VOC_TRAIN_LEN,
    build_trainaug,
)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Build VOC 2012 trainaug from SBD (mmseg layout)")
    parser.add_argument("devkit_path", help="VOCdevkit folder holding VOC2012/")
    parser.add_argument("aug_path", help="extracted SBD release (holds dataset/cls/*.mat)")
    parser.add_argument(
        "-o", "--out_dir", help="PNG folder (default: <devkit>/VOC2012/SegmentationClassAug)"
    )
    parser.add_argument("--nproc", type=int, default=1, help="worker processes")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    res = build_trainaug(args.devkit_path, args.aug_path, args.out_dir, args.nproc)
    print(
        f"{res.converted} PNGs in {res.out_dir}; aug.txt: {len(res.aug)} images, trainaug.txt: "
        f"{len(res.trainaug)} images (VOC train {res.voc_train} + aug {len(res.aug)})."
    )
    if len(res.trainaug) != TRAINAUG_LEN or res.voc_train != VOC_TRAIN_LEN:
        print(
            f"warning: the full VOC 2012 + SBD data give trainaug {TRAINAUG_LEN} and VOC train "
            f"{VOC_TRAIN_LEN}; got {len(res.trainaug)} and {res.voc_train}.",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    run_cli(lambda: sys.exit(main()))
