"""PASCAL VOC 2012 "trainaug" (10,582 images) from the SBD release, in mmseg 1.x's layout.

``<aug_path>`` is the extracted SBD release (``benchmark_RELEASE``: ``dataset/cls/*.mat``,
``dataset/train.txt``, ``dataset/val.txt``). :func:`build_trainaug` writes into
``<devkit>/VOC2012``:

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

import os
import os.path as osp
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Optional

import numpy as np
from PIL import Image

from hamseg.datasets.converters.mat_files import read_mat_field
from hamseg.datasets.samples import InvalidSampleError
from hamseg.utils.progress_map import map_with_progress

__all__ = [
    "TRAINAUG_LEN",
    "VOC_TRAIN_LEN",
    "TrainAug",
    "build_trainaug",
    "convert_mat",
    "read_list",
    "sbd_class_map",
    "split_lists",
    "write_list",
]

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
    """The class map (H, W) uint8 stored in an SBD ``cls/<id>.mat`` (struct ``GTcls``).

    Raises:
        InvalidSampleError: One line naming a file that cannot be read or holds no class map.
    """
    what = "SBD class map"
    gt = read_mat_field(mat_path, "GTcls", what, squeeze_me=True, struct_as_record=False)
    segmentation = getattr(gt, "Segmentation", None)
    if segmentation is None or np.ndim(segmentation) != 2:
        raise InvalidSampleError(f"{what} {mat_path!r} holds no 2-D GTcls.Segmentation")
    return np.asarray(segmentation).astype(np.uint8)


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


@dataclass
class TrainAug:
    """What :func:`build_trainaug` wrote: PNG count and folder, the two lists, VOC train size."""

    converted: int
    out_dir: str
    aug: list[str]
    trainaug: list[str]
    voc_train: int


def build_trainaug(
    devkit_path: str, aug_path: str, out_dir: Optional[str] = None, nproc: int = 1
) -> TrainAug:
    """Convert every SBD class map to PNG and write ``aug.txt`` and ``trainaug.txt``.

    Args:
        devkit_path: VOCdevkit folder holding VOC2012/.
        aug_path: Extracted SBD release (holds dataset/cls/*.mat).
        out_dir: PNG folder (default: <devkit>/VOC2012/SegmentationClassAug).
        nproc: Worker processes.

    Raises:
        FileNotFoundError: If the SBD class maps, a split file, or the .mat of an SBD split
            image is missing; the message says what to download.
    """
    voc = osp.join(devkit_path, "VOC2012")
    sets = osp.join(voc, "ImageSets", "Segmentation")
    in_dir = osp.join(aug_path, "dataset", "cls")
    out_dir = out_dir or osp.join(voc, "SegmentationClassAug")
    if not osp.isdir(in_dir):
        raise FileNotFoundError(
            f"SBD class maps not found: {in_dir}. Download the SBD release (benchmark.tgz, "
            "http://home.bharathh.info/pubs/codes/SBD/download.html) and extract its "
            f"benchmark_RELEASE folder as {aug_path} (see data/README.md)."
        )
    voc_train = read_list(osp.join(sets, "train.txt"))
    voc_val = read_list(osp.join(sets, "val.txt"))
    sbd = read_list(osp.join(aug_path, "dataset", "train.txt"))
    sbd += read_list(osp.join(aug_path, "dataset", "val.txt"))

    names = sorted(n for n in os.listdir(in_dir) if n.endswith(".mat"))
    os.makedirs(out_dir, exist_ok=True)
    work = partial(convert_mat, in_dir=in_dir, out_dir=out_dir)
    converted = map_with_progress(work, names, nproc, "SBD .mat -> PNG", chunksize=32)

    missing = sorted(set(sbd) - set(converted))
    if missing:
        raise FileNotFoundError(
            f"{len(missing)} SBD images of dataset/train.txt + val.txt have no .mat in {in_dir}, "
            f"e.g. {missing[:5]}"
        )
    aug, trainaug = split_lists(voc_train, voc_val, sbd)
    write_list(osp.join(sets, "aug.txt"), aug)
    write_list(osp.join(sets, "trainaug.txt"), trainaug)
    return TrainAug(len(converted), out_dir, aug, trainaug, len(voc_train))
