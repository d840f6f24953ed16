"""Build PASCAL VOC 2012 "trainaug" (10,582 images) from the SBD release, in mmseg 1.x's layout.

Usage (from the repository root; data/README.md shows the downloads and the resulting tree)::

    python tools/dataset_converters/voc_aug.py data/VOCdevkit data/VOCdevkit/VOCaug

``data/VOCdevkit/VOCaug`` is the extracted SBD release (``benchmark_RELEASE``:
``dataset/cls/*.mat``, ``dataset/train.txt``, ``dataset/val.txt``). The tool writes into
``data/VOCdevkit/VOC2012``:

- ``SegmentationClassAug/<id>.png``: the class map of every SBD ``.mat`` (``GTcls.Segmentation``,
  values 0..20) as an 8-bit PNG;
- ``ImageSets/Segmentation/aug.txt``: SBD train + val images that are in neither VOC 2012
  ``train.txt`` nor ``val.txt`` (9,118 with the real data);
- ``ImageSets/Segmentation/trainaug.txt``: VOC 2012 train plus SBD train + val, minus VOC 2012
  val (10,582 with the real data).

mmseg's ``pascal_voc12_aug`` and hamseg's VOC configs train on VOC ``train.txt`` (labels in
``SegmentationClass``) concatenated with ``aug.txt`` (labels in ``SegmentationClassAug``), i.e. the
10,582 trainaug images, each with the official VOC label where one exists.
"""

from __future__ import annotations

import argparse
import os
import os.path as osp
import sys
from collections.abc import Iterable, Sequence
from functools import partial
from multiprocessing import Pool
from typing import Optional

import numpy as np
from PIL import Image
from scipy.io import loadmat
from tqdm import tqdm

#: Sizes of the real lists (paper App. D: 10,582 training images).
TRAINAUG_LEN = 10582
VOC_TRAIN_LEN = 1464


def read_list(path: str) -> list[str]:
    """Image ids of a split file, one per line (blank lines skipped).

    Raises:
        FileNotFoundError: With the file that is missing.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f"split file not found: {path}")
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def write_list(path: str, ids: Iterable[str]) -> None:
    """Write ids one per line (sorted, so that reruns give identical files)."""
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.writelines(i + "\n" for i in sorted(ids))


def sbd_class_map(mat_path: str) -> np.ndarray:
    """The class map (H, W) uint8 stored in an SBD ``cls/<id>.mat`` (struct ``GTcls``)."""
    gt = loadmat(mat_path, squeeze_me=True, struct_as_record=False)["GTcls"]
    return np.asarray(gt.Segmentation).astype(np.uint8)


def convert_mat(name: str, in_dir: str, out_dir: str) -> str:
    """Convert ``in_dir/<id>.mat`` to ``out_dir/<id>.png``; returns the id."""
    image_id = osp.splitext(name)[0]
    Image.fromarray(sbd_class_map(osp.join(in_dir, name))).save(
        osp.join(out_dir, image_id + ".png")
    )
    return image_id


def split_lists(
    voc_train: Sequence[str], voc_val: Sequence[str], sbd: Sequence[str]
) -> tuple[list[str], list[str]]:
    """``(aug, trainaug)``: SBD minus VOC train/val, and VOC train + SBD minus VOC val."""
    val = set(voc_val)
    aug = set(sbd) - set(voc_train) - val
    trainaug = (set(voc_train) | set(sbd)) - val
    return sorted(aug), sorted(trainaug)


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
    voc = osp.join(args.devkit_path, "VOC2012")
    sets = osp.join(voc, "ImageSets", "Segmentation")
    in_dir = osp.join(args.aug_path, "dataset", "cls")
    out_dir = args.out_dir or osp.join(voc, "SegmentationClassAug")
    if not osp.isdir(in_dir):
        raise FileNotFoundError(
            f"SBD class maps not found: {in_dir}. Download the SBD release (benchmark.tgz, "
            "http://home.bharathh.info/pubs/codes/SBD/download.html) and extract its "
            f"benchmark_RELEASE folder as {args.aug_path} (see data/README.md)."
        )
    voc_train = read_list(osp.join(sets, "train.txt"))
    voc_val = read_list(osp.join(sets, "val.txt"))
    sbd = read_list(osp.join(args.aug_path, "dataset", "train.txt"))
    sbd += read_list(osp.join(args.aug_path, "dataset", "val.txt"))

    names = sorted(n for n in os.listdir(in_dir) if n.endswith(".mat"))
    os.makedirs(out_dir, exist_ok=True)
    work = partial(convert_mat, in_dir=in_dir, out_dir=out_dir)
    bar = dict(total=len(names), desc="SBD .mat -> PNG", unit="img")
    if args.nproc > 1:
        with Pool(args.nproc) as pool:
            converted = list(tqdm(pool.imap_unordered(work, names, chunksize=32), **bar))
    else:
        converted = [work(n) for n in tqdm(names, **bar)]

    missing = sorted(set(sbd) - set(converted))
    if missing:
        raise FileNotFoundError(
            f"{len(missing)} SBD images of dataset/train.txt + val.txt have no .mat in {in_dir}, "
            f"e.g. {missing[:5]}"
        )
    aug, trainaug = split_lists(voc_train, voc_val, sbd)
    write_list(osp.join(sets, "aug.txt"), aug)
    write_list(osp.join(sets, "trainaug.txt"), trainaug)
    print(
        f"{len(converted)} PNGs in {out_dir}; aug.txt: {len(aug)} images, trainaug.txt: "
        f"{len(trainaug)} images (VOC train {len(voc_train)} + aug {len(aug)})."
    )
    if len(trainaug) != TRAINAUG_LEN or len(voc_train) != VOC_TRAIN_LEN:
        print(
            f"warning: the full VOC 2012 + SBD data give trainaug {TRAINAUG_LEN} and VOC train "
            f"{VOC_TRAIN_LEN}; got {len(trainaug)} and {len(voc_train)}.",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
