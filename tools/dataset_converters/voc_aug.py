"""Build PASCAL VOC 2012 "trainaug" (10,582 images) from the SBD release, in mmseg 1.x's layout.

    python tools/dataset_converters/voc_aug.py data/VOCdevkit data/VOCdevkit/VOCaug
    python tools/dataset_converters/voc_aug.py data/VOCdevkit data/VOCdevkit/VOCaug --voc-labels

``data/VOCdevkit/VOCaug`` is the extracted SBD release (``benchmark_RELEASE``); the tool writes
``SegmentationClassAug/<id>.png`` and ``ImageSets/Segmentation/{aug,trainaug}.txt`` into
``data/VOCdevkit/VOC2012`` (data/README.md). ``--voc-labels`` also writes VOC 2012's trainval
labels into SegmentationClassAug (VOC's label wins where SBD has the image): the release's 12,031
labels, which its stage 2 reads (docs/recipes.md, "Known differences from the release").
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack; before anything imports mmseg)

# isort: split
from hamseg.cli import run_cli  # noqa: E402
from tools.dataset_converters.converters import (  # noqa: E402
    RELEASE_AUG_LEN,
    TRAINAUG_LEN,
    VOC_TRAIN_LEN,
    build_trainaug,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build VOC 2012 trainaug from SBD (mmseg layout)")
    parser.add_argument("devkit_path", help="VOCdevkit folder holding VOC2012/")
    parser.add_argument("aug_path", help="extracted SBD release (holds dataset/cls/*.mat)")
    parser.add_argument(
        "-o", "--out_dir", help="PNG folder (default: <devkit>/VOC2012/SegmentationClassAug)"
    )
    parser.add_argument("--nproc", type=int, default=1, help="worker processes")
    parser.add_argument(
        "--voc-labels",
        action="store_true",
        help="also write VOC 2012's trainval labels (VOC's wins over SBD's on shared images): "
        "the release's SegmentationClassAug, 12,031 labels",
    )
    args = parser.parse_args(argv)
    res = build_trainaug(args.devkit_path, args.aug_path, args.out_dir, args.nproc, args.voc_labels)
    print(
        f"{res.labels} PNGs in {res.out_dir}; aug.txt: {len(res.aug)} images, trainaug.txt: "
        f"{len(res.trainaug)} images (VOC train {res.voc_train} + aug {len(res.aug)})."
    )
    if args.voc_labels:
        print(
            f"SBD {res.converted} + VOC trainval {len(res.voc_written)} labels, "
            f"{len(res.overlap)} images in both: VOC's label kept."
        )
    if len(res.trainaug) != TRAINAUG_LEN or res.voc_train != VOC_TRAIN_LEN:
        print(
            f"warning: the full VOC 2012 + SBD data give trainaug {TRAINAUG_LEN} and VOC train "
            f"{VOC_TRAIN_LEN}; got {len(res.trainaug)} and {res.voc_train}.",
            file=sys.stderr,
        )
    if args.voc_labels and res.labels != RELEASE_AUG_LEN:
        print(
            f"warning: the full VOC 2012 + SBD data give {RELEASE_AUG_LEN} labels; got "
            f"{res.labels}.",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    run_cli(lambda: sys.exit(main()))
