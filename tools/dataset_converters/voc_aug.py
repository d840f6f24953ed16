"""Build PASCAL VOC 2012 "trainaug" (10,582 images) from the SBD release, in mmseg 1.x's layout.

    python tools/dataset_converters/voc_aug.py data/VOCdevkit data/VOCdevkit/VOCaug

``data/VOCdevkit/VOCaug`` is the extracted SBD release (``benchmark_RELEASE``); the tool writes
``SegmentationClassAug/<id>.png`` and ``ImageSets/Segmentation/{aug,trainaug}.txt`` into
``data/VOCdevkit/VOC2012`` (data/README.md).
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack; before anything imports mmseg)

# isort: split
from hamseg.cli import run_cli  # noqa: E402
from hamseg.datasets.converters import TRAINAUG_LEN, VOC_TRAIN_LEN, build_trainaug  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build VOC 2012 trainaug from SBD (mmseg layout)")
    parser.add_argument("devkit_path", help="VOCdevkit folder holding VOC2012/")
    parser.add_argument("aug_path", help="extracted SBD release (holds dataset/cls/*.mat)")
    parser.add_argument(
        "-o", "--out_dir", help="PNG folder (default: <devkit>/VOC2012/SegmentationClassAug)"
    )
    parser.add_argument("--nproc", type=int, default=1, help="worker processes")
    args = parser.parse_args(argv)
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
