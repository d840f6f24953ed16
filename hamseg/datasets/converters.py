"""Dataset preparation behind tools/dataset_converters/: VOC 2012 trainaug from SBD and PASCAL
Context's 60-class label maps (from the release's ``.mat`` files, without mmseg's ``detail``),
in mmseg 1.x's layout; data/README.md shows the downloads, the trees and the list sizes.

Not imported by ``import hamseg``: it needs scipy, which training does not.
"""

from __future__ import annotations

import json
import os
import os.path as osp
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Optional

import numpy as np
from PIL import Image
from scipy.io import loadmat

from hamseg.utils.progress_map import map_with_progress

from .loading import InvalidSampleError

__all__ = [
    "CONTEXT59",
    "NUM_FULL_LABELS",
    "TRAINAUG_LEN",
    "VOC_TRAIN_LEN",
    "ContextConversion",
    "TrainAug",
    "build_trainaug",
    "check_labels",
    "convert_pascal_context",
    "lookup_table",
    "read_list",
    "read_mat_field",
    "read_split",
    "split_lists",
    "to_context60",
]

#: Sizes of the real lists (paper App. D: 10,582 training images).
TRAINAUG_LEN = 10582
VOC_TRAIN_LEN = 1464
#: The 59 Context classes as ids of the 459-label set (labels.txt numbering); sorted by id, which
#: is also mmseg's ``PascalContextDataset59`` class order.
CONTEXT59: tuple[tuple[int, str], ...] = (
    (2, "aeroplane"), (9, "bag"), (18, "bed"), (19, "bedclothes"), (22, "bench"),
    (23, "bicycle"), (25, "bird"), (31, "boat"), (33, "book"), (34, "bottle"),
    (44, "building"), (45, "bus"), (46, "cabinet"), (59, "car"), (65, "cat"),
    (68, "ceiling"), (72, "chair"), (80, "cloth"), (85, "computer"), (98, "cow"),
    (104, "cup"), (105, "curtain"), (113, "dog"), (115, "door"), (144, "fence"),
    (158, "floor"), (159, "flower"), (162, "food"), (187, "grass"), (189, "ground"),
    (207, "horse"), (220, "keyboard"), (232, "light"), (258, "motorbike"), (259, "mountain"),
    (260, "mouse"), (284, "person"), (295, "plate"), (296, "platform"), (308, "pottedplant"),
    (324, "road"), (326, "rock"), (347, "sheep"), (349, "shelves"), (354, "sidewalk"),
    (355, "sign"), (360, "sky"), (366, "snow"), (368, "sofa"), (397, "table"),
    (415, "track"), (416, "train"), (420, "tree"), (424, "truck"), (427, "tvmonitor"),
    (440, "wall"), (445, "water"), (454, "window"), (458, "wood"),
)  # fmt: skip
#: Number of labels of the full PASCAL Context label set.
NUM_FULL_LABELS = 459


def read_mat_field(path: str, field: str, what: str, **loadmat_kwargs: Any) -> Any:
    """``scipy.io.loadmat(path, **loadmat_kwargs)[field]``.

    Raises:
        InvalidSampleError: One line naming the file (``what``, e.g. "SBD class map"): missing,
            not a MATLAB file scipy reads (truncated, corrupt), or without ``field``.
    """
    try:
        return loadmat(path, **loadmat_kwargs)[field]
    except FileNotFoundError:
        raise InvalidSampleError(f"{what} {path!r} does not exist") from None
    except KeyError:
        raise InvalidSampleError(f"{what} {path!r} holds no {field!r} variable") from None
    except Exception as err:  # scipy raises several types for a damaged file
        reason = " ".join(f"{type(err).__name__}: {err}".split())
        raise InvalidSampleError(
            f"{what} {path!r} cannot be read ({reason}); extract it again from the release"
        ) from None


def _write_list(path: str, ids: Iterable[str]) -> None:
    """Ids one per line, sorted (reruns give identical files)."""
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.writelines(i + "\n" for i in sorted(ids))


# ------------------------------------------------------------------------------------------
# VOC 2012 trainaug from SBD
# ------------------------------------------------------------------------------------------
def read_list(path: str) -> list[str]:
    """Image ids of a split file, one per line; FileNotFoundError naming a missing one."""
    if not osp.isfile(path):
        raise FileNotFoundError(f"split file not found: {path}")
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def _convert_sbd(name: str, in_dir: str, out_dir: str) -> str:
    """``in_dir/<id>.mat`` (SBD struct ``GTcls``) -> ``out_dir/<id>.png``; returns the id."""
    path, what = osp.join(in_dir, name), "SBD class map"
    gt = read_mat_field(path, "GTcls", what, squeeze_me=True, struct_as_record=False)
    segmentation = getattr(gt, "Segmentation", None)
    if segmentation is None or np.ndim(segmentation) != 2:
        raise InvalidSampleError(f"{what} {path!r} holds no 2-D GTcls.Segmentation")
    image_id = osp.splitext(name)[0]
    Image.fromarray(np.asarray(segmentation).astype(np.uint8)).save(
        osp.join(out_dir, image_id + ".png")
    )
    return image_id


def split_lists(
    voc_train: Sequence[str], voc_val: Sequence[str], sbd: Sequence[str]
) -> tuple[list[str], list[str]]:
    """``(aug, trainaug)``: SBD minus VOC train/val, and VOC train + SBD minus VOC val."""
    val = set(voc_val)
    return sorted(set(sbd) - set(voc_train) - val), sorted((set(voc_train) | set(sbd)) - val)


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
    """Every SBD class map as ``SegmentationClassAug/<id>.png`` (values 0..20), and
    ``ImageSets/Segmentation/{aug,trainaug}.txt`` (:func:`split_lists`) under VOC2012/.

    Args:
        devkit_path: VOCdevkit folder holding VOC2012/.
        aug_path: Extracted SBD release (``benchmark_RELEASE``: dataset/cls/*.mat, train/val.txt).
        out_dir: PNG folder (default: <devkit>/VOC2012/SegmentationClassAug).
        nproc: Worker processes.

    Raises:
        FileNotFoundError: The SBD class maps, a split file, or the .mat of an SBD split image
            is missing; the message says what to download.
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
    sbd = [i for s in ("train", "val") for i in read_list(osp.join(aug_path, f"dataset/{s}.txt"))]
    names = sorted(n for n in os.listdir(in_dir) if n.endswith(".mat"))
    os.makedirs(out_dir, exist_ok=True)
    work = partial(_convert_sbd, in_dir=in_dir, out_dir=out_dir)
    converted = map_with_progress(work, names, nproc, "SBD .mat -> PNG", chunksize=32)
    missing = sorted(set(sbd) - set(converted))
    if missing:
        raise FileNotFoundError(
            f"{len(missing)} SBD images of dataset/train.txt + val.txt have no .mat in {in_dir}, "
            f"e.g. {missing[:5]}"
        )
    aug, trainaug = split_lists(voc_train, voc_val, sbd)
    _write_list(osp.join(sets, "aug.txt"), aug)
    _write_list(osp.join(sets, "trainaug.txt"), trainaug)
    return TrainAug(len(converted), out_dir, aug, trainaug, len(voc_train))


# ------------------------------------------------------------------------------------------
# PASCAL Context, 60 classes
# ------------------------------------------------------------------------------------------
def lookup_table() -> np.ndarray:
    """(460,) uint8: full-label id -> 60-class label (0 background, 1..59 the classes)."""
    lut = np.zeros(NUM_FULL_LABELS + 1, np.uint8)
    for rank, (full_id, _) in enumerate(CONTEXT59, start=1):
        lut[full_id] = rank
    return lut


def to_context60(label_map: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """A full-label ``LabelMap`` (H, W) as 0..59; ValueError on ids outside 0..459."""
    label_map = np.asarray(label_map)
    if label_map.size and (label_map.min() < 0 or label_map.max() > NUM_FULL_LABELS):
        raise ValueError(
            f"LabelMap values must be in 0..{NUM_FULL_LABELS}, got "
            f"{label_map.min()}..{label_map.max()}"
        )
    return lut[label_map.astype(np.int64)]


def _convert_context(image_id: str, mat_dir: str, out_dir: str, lut: np.ndarray) -> str:
    """``mat_dir/<id>.mat`` -> ``out_dir/<id>.png``; InvalidSampleError naming a bad file."""
    path = osp.join(mat_dir, image_id + ".mat")
    label_map = read_mat_field(path, "LabelMap", "PASCAL Context label map")
    try:
        converted = to_context60(label_map, lut)
    except ValueError as err:
        raise InvalidSampleError(f"PASCAL Context label map {path!r}: {err}") from None
    Image.fromarray(converted).save(osp.join(out_dir, image_id + ".png"))
    return image_id


def check_labels(names: Mapping[int, str]) -> None:
    """ValueError listing every id of :data:`CONTEXT59` that ``labels.txt`` (``names``) names
    otherwise (spaces, dashes and case ignored)."""

    def norm(s: str) -> str:
        return re.sub(r"[\s_-]", "", s.lower())

    bad = [
        f"{i}: expected {n!r}, labels.txt has {names.get(i)!r}"
        for i, n in CONTEXT59
        if norm(names.get(i, "")) != norm(n)
    ]
    if bad:
        raise ValueError(
            "labels.txt does not name the 59 Context classes at the expected ids:\n  "
            + "\n  ".join(bad)
            + "\n(pass --no-label-check to convert anyway)"
        )


def read_split(json_path: str, voc2010: str) -> tuple[list[str], list[str], str]:
    """``(train ids, val ids, source)``: the Detail json's ``images[].phase`` if it exists, else
    VOC 2010's ``ImageSets/Main/{train,val}.txt`` (the same split)."""
    if osp.isfile(json_path):
        with open(json_path) as f:
            images = json.load(f).get("images", [])
        split: dict[str, list[str]] = {"train": [], "val": []}
        for image in images:
            if image.get("phase") in split and "file_name" in image:
                split[image["phase"]].append(osp.splitext(image["file_name"])[0])
        if split["train"] and split["val"]:
            return sorted(split["train"]), sorted(split["val"]), json_path
    main = osp.join(voc2010, "ImageSets", "Main")
    files = [osp.join(main, f"{s}.txt") for s in ("train", "val")]
    if not all(osp.isfile(f) for f in files):
        raise FileNotFoundError(
            f"no train/val split: neither {json_path} (with images[].phase) nor {files[0]} and "
            f"{files[1]} (the VOC 2010 trainval release) exist"
        )
    train, val = (sorted(line.split()[0] for line in read_list(f)) for f in files)
    return train, val, main


def _find_mat_dir(json_path: str, voc2010: str, mat_dir: Optional[str]) -> str:
    """``mat_dir``, else ``json_path`` if a folder, else ``trainval/`` next to the json, else
    ``<voc2010>/trainval``: the first holding ``.mat`` files; FileNotFoundError otherwise."""
    candidates = [mat_dir] if mat_dir else []
    candidates += [
        json_path if osp.isdir(json_path) else None,
        osp.join(osp.dirname(json_path), "trainval"),
        osp.join(voc2010, "trainval"),
    ]
    for path in candidates:
        if path and osp.isdir(path) and any(n.endswith(".mat") for n in os.listdir(path)):
            return path
    raise FileNotFoundError(
        "PASCAL Context label maps (.mat) not found in "
        + ", ".join(p for p in dict.fromkeys(candidates) if p)
        + ". Download trainval.tar.gz of the PASCAL Context release "
        "(https://cs.stanford.edu/~roozbeh/pascal-context/) and extract it so that "
        f"{osp.join(voc2010, 'trainval')}/<image id>.mat exist (10,103 files), or pass "
        "--mat-dir. See data/README.md."
    )


@dataclass
class ContextConversion:
    """What :func:`convert_pascal_context` did: the PNG and ``.mat`` folders, the ``labels.txt``
    the ids were checked against (if any), the split's source, the ids converted per split and
    the ids of the split without a ``.mat`` (left out)."""

    out_dir: str
    mat_dir: str
    labels_checked: Optional[str]
    source: str
    splits: dict[str, list[str]]
    missing: dict[str, list[str]]


def convert_pascal_context(
    devkit_path: str,
    json_path: str,
    out_dir: Optional[str] = None,
    mat_dir: Optional[str] = None,
    labels: Optional[str] = None,
    label_check: bool = True,
    nproc: int = 1,
) -> ContextConversion:
    """Write the 60-class PNGs and ``ImageSets/SegmentationContext/{train,val}.txt``.

    Args:
        devkit_path: VOCdevkit folder holding VOC2010/.
        json_path: Detail ``trainval_merged.json`` (only its split is read, if it exists).
        out_dir: PNG folder (default: <devkit>/VOC2010/SegmentationClassContext).
        mat_dir: Folder of the release's ``<id>.mat`` files (default: found near the json).
        labels: The release's ``labels.txt`` (default: next to the .mat folder or in it).
        label_check: Check the 59 class ids against ``labels.txt`` before writing anything.
        nproc: Worker processes.

    Raises:
        FileNotFoundError: The label maps or the split are missing.
        ValueError: ``labels.txt`` names the 59 ids otherwise (:func:`check_labels`).
    """
    voc2010 = osp.join(devkit_path, "VOC2010")
    out_dir = out_dir or osp.join(voc2010, "SegmentationClassContext")
    mat_dir = _find_mat_dir(json_path, voc2010, mat_dir)
    if not labels:
        near = [osp.join(osp.dirname(mat_dir), "labels.txt"), osp.join(mat_dir, "labels.txt")]
        labels = next((p for p in near if osp.isfile(p)), None)
    checked = labels if labels and label_check else None
    if checked:
        with open(checked) as f:
            found = (re.match(r"\s*(\d+)\s*:\s*(.+?)\s*$", line) for line in f)
            check_labels({int(m.group(1)): m.group(2) for m in found if m})
    train, val, source = read_split(json_path, voc2010)
    available = {osp.splitext(n)[0] for n in os.listdir(mat_dir) if n.endswith(".mat")}
    splits, missing = {}, {}
    for name, ids in (("train", train), ("val", val)):
        splits[name] = [i for i in ids if i in available]
        missing[name] = [i for i in ids if i not in available]

    os.makedirs(out_dir, exist_ok=True)
    work = partial(_convert_context, mat_dir=mat_dir, out_dir=out_dir, lut=lookup_table())
    todo = splits["train"] + splits["val"]
    map_with_progress(work, todo, nproc, "Context .mat -> PNG", chunksize=32)
    for name, ids in splits.items():
        _write_list(osp.join(voc2010, "ImageSets", "SegmentationContext", f"{name}.txt"), ids)
    return ContextConversion(out_dir, mat_dir, checked, source, splits, missing)
