"""Dataset preparation behind tools/dataset_converters/: VOC 2012 trainaug from SBD and PASCAL
Context's 60-class label maps from the release's ``.mat`` files (no ``detail`` package), in
mmseg 1.x's layout; data/README.md shows the downloads, the trees and the list sizes.

A checkout's code, not the hamseg library's: it needs scipy, which training does not.
"""

from __future__ import annotations

import json
import os
import os.path as osp
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Optional

import numpy as np
from PIL import Image
from scipy.io import loadmat

from hamseg.datasets.loading import InvalidSampleError
from hamseg.utils.progress_map import map_with_progress

#: Sizes of the real lists (paper App. D: 10,582 training images).
TRAINAUG_LEN = 10582
VOC_TRAIN_LEN = 1464
#: The release's SegmentationClassAug: SBD's 11,355 class maps and VOC 2012's 2,913 trainval
#: labels, 2,237 images in both (docs/recipes.md, "Known differences from the release").
RELEASE_AUG_LEN = 12031
#: The 59 Context classes as ids of the 459-label set (labels.txt numbering); sorted by id, which
#: is also mmseg's ``PascalContextDataset59`` class order.
CONTEXT59: tuple[tuple[int, str], ...] = (
    (2, "aeroplane"),
    (9, "bag"),
    (18, "bed"),
    (19, "bedclothes"),
    (22, "bench"),
    (23, "bicycle"),
    (25, "bird"),
    (31, "boat"),
    (33, "book"),
    (34, "bottle"),
    (44, "building"),
    (45, "bus"),
    (46, "cabinet"),
    (59, "car"),
    (65, "cat"),
    (68, "ceiling"),
    (72, "chair"),
    (80, "cloth"),
    (85, "computer"),
    (98, "cow"),
    (104, "cup"),
    (105, "curtain"),
    (113, "dog"),
    (115, "door"),
    (144, "fence"),
    (158, "floor"),
    (159, "flower"),
    (162, "food"),
    (187, "grass"),
    (189, "ground"),
    (207, "horse"),
    (220, "keyboard"),
    (232, "light"),
    (258, "motorbike"),
    (259, "mountain"),
    (260, "mouse"),
    (284, "person"),
    (295, "plate"),
    (296, "platform"),
    (308, "pottedplant"),
    (324, "road"),
    (326, "rock"),
    (347, "sheep"),
    (349, "shelves"),
    (354, "sidewalk"),
    (355, "sign"),
    (360, "sky"),
    (366, "snow"),
    (368, "sofa"),
    (397, "table"),
    (415, "track"),
    (416, "train"),
    (420, "tree"),
    (424, "truck"),
    (427, "tvmonitor"),
    (440, "wall"),
    (445, "water"),
    (454, "window"),
    (458, "wood"),
)
NUM_FULL_LABELS = 459  # labels of the full PASCAL Context label set


def _mat_to_png(image_id: str, mat_dir: str, out_dir: str, sbd: bool) -> str:
    """``mat_dir/<id>.mat`` -> ``out_dir/<id>.png``: SBD's ``GTcls.Segmentation`` (0..20) or
    Context's ``LabelMap`` as 0..59; returns the id. A bad file is one line naming it."""
    path = osp.join(mat_dir, image_id + ".mat")
    what, field = ("SBD class map", "GTcls") if sbd else ("PASCAL Context label map", "LabelMap")
    try:
        label = loadmat(path, squeeze_me=sbd, struct_as_record=not sbd)[field]
    except FileNotFoundError:
        raise InvalidSampleError(f"{what} {path!r} does not exist") from None
    except KeyError:
        raise InvalidSampleError(f"{what} {path!r} holds no {field!r} variable") from None
    except Exception as err:  # scipy raises several types for a damaged file
        reason = " ".join(f"{type(err).__name__}: {err}".split())
        raise InvalidSampleError(
            f"{what} {path!r} cannot be read ({reason}); extract it again from the release"
        ) from None
    if sbd:
        label = getattr(label, "Segmentation", None)
        if label is None or np.ndim(label) != 2:
            raise InvalidSampleError(f"{what} {path!r} holds no 2-D GTcls.Segmentation")
        label = np.asarray(label).astype(np.uint8)
    else:
        try:
            label = to_context60(label, lookup_table())
        except ValueError as err:
            raise InvalidSampleError(f"{what} {path!r}: {err}") from None
    Image.fromarray(label).save(osp.join(out_dir, image_id + ".png"))
    return image_id


def read_list(path: str) -> list[str]:
    """Image ids of a split file, one per line; FileNotFoundError naming a missing file."""
    if not osp.isfile(path):
        raise FileNotFoundError(f"split file not found: {path}")
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def _write_list(path: str, ids: Iterable[str]) -> None:
    """Ids one per line, sorted (reruns give identical files)."""
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.writelines(i + "\n" for i in sorted(ids))


def _mats(folder: str) -> list[str]:
    """The ids of the ``<id>.mat`` files in a folder."""
    return [n[:-4] for n in os.listdir(folder) if n.endswith(".mat")]


@dataclass
class TrainAug:
    """What :func:`build_trainaug` wrote: SBD's PNG count and folder, the two lists, the VOC
    train size; with ``voc_labels``, the VOC trainval ids written and those SBD had too."""

    converted: int
    out_dir: str
    aug: list[str]
    trainaug: list[str]
    voc_train: int
    voc_written: list[str] = field(default_factory=list)
    overlap: list[str] = field(default_factory=list)

    @property
    def labels(self) -> int:
        """PNGs in ``out_dir`` written by this run (SBD's and VOC's, each id once)."""
        return self.converted + len(self.voc_written) - len(self.overlap)


def _copy_voc_label(image_id: str, voc_dir: str, out_dir: str) -> str:
    """``voc_dir/<id>.png`` (VOC's palette PNG: class indices, 255 at object borders) ->
    ``out_dir/<id>.png`` as a grayscale PNG of the same indices; returns the id."""
    path = osp.join(voc_dir, image_id + ".png")
    try:
        with Image.open(path) as image:
            mode = image.mode
            label = np.array(image)
    except FileNotFoundError:
        raise InvalidSampleError(f"VOC label {path!r} does not exist") from None
    except OSError as err:
        raise InvalidSampleError(f"VOC label {path!r} cannot be read ({err})") from None
    if label.ndim != 2 or mode not in ("P", "L"):
        raise InvalidSampleError(
            f"VOC label {path!r} is a {mode!r}-mode image: VOC 2012's SegmentationClass PNGs hold "
            "class indices (palette mode); extract it again from VOCtrainval_11-May-2012.tar"
        )
    bad = sorted(set(np.unique(label).tolist()) - set(range(21)) - {255})
    if bad:
        raise InvalidSampleError(f"VOC label {path!r} holds values {bad} outside 0..20 and 255")
    Image.fromarray(label.astype(np.uint8)).save(osp.join(out_dir, image_id + ".png"))
    return image_id


def build_trainaug(
    devkit_path: str,
    aug_path: str,
    out_dir: Optional[str] = None,
    nproc: int = 1,
    voc_labels: bool = False,
) -> TrainAug:
    """Every SBD class map as ``SegmentationClassAug/<id>.png`` (``out_dir``) and
    ``ImageSets/Segmentation/{aug,trainaug}.txt`` under VOC2012/, from the
    extracted SBD release ``aug_path``. Raises FileNotFoundError saying what to download when
    the class maps, a split file or an SBD image's .mat is missing.

    With ``voc_labels``, VOC 2012's trainval labels (``SegmentationClass``, trainval.txt) are
    written into the folder too, replacing SBD's where SBD has the image: the release's
    SegmentationClassAug of 12,031 labels, built as DeepLab's recipe builds it (VOC's label wins;
    docs/recipes.md, "Known differences from the release").
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
    voc_train, voc_val = (read_list(osp.join(sets, f"{s}.txt")) for s in ("train", "val"))
    trainval = read_list(osp.join(sets, "trainval.txt")) if voc_labels else []  # checked first
    sbd = [i for s in ("train", "val") for i in read_list(osp.join(aug_path, f"dataset/{s}.txt"))]
    ids = sorted(_mats(in_dir))
    os.makedirs(out_dir, exist_ok=True)
    work = partial(_mat_to_png, mat_dir=in_dir, out_dir=out_dir, sbd=True)
    converted = map_with_progress(work, ids, nproc, "SBD .mat -> PNG", chunksize=32)
    missing = sorted(set(sbd) - set(converted))
    if missing:
        raise FileNotFoundError(
            f"{len(missing)} SBD images of dataset/train.txt + val.txt have no .mat in {in_dir}, "
            f"e.g. {missing[:5]}"
        )
    written = []
    if voc_labels:  # after SBD's: VOC's label replaces SBD's on the images both have
        voc_dir = osp.join(voc, "SegmentationClass")
        work = partial(_copy_voc_label, voc_dir=voc_dir, out_dir=out_dir)
        written = map_with_progress(work, trainval, nproc, "VOC labels -> PNG", chunksize=32)
    train = set(voc_train)
    val = set(voc_val)  # aug: SBD - train - val, trainaug: train + SBD - val
    aug = sorted(set(sbd) - train - val)
    trainaug = sorted((train | set(sbd)) - val)
    _write_list(osp.join(sets, "aug.txt"), aug)
    _write_list(osp.join(sets, "trainaug.txt"), trainaug)
    overlap = sorted(set(written) & set(converted))
    voc_ids = sorted(written)
    return TrainAug(len(converted), out_dir, aug, trainaug, len(voc_train), voc_ids, overlap)


def lookup_table() -> np.ndarray:
    """(460,) uint8: full-label id -> 60-class label (0 background, 1..59 the classes)."""
    lut = np.zeros(NUM_FULL_LABELS + 1, np.uint8)
    lut[[full_id for full_id, _ in CONTEXT59]] = np.arange(1, len(CONTEXT59) + 1)
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


def check_labels(path: str) -> None:
    """ValueError listing every id of :data:`CONTEXT59` that the release's ``labels.txt``
    (lines ``<id>: <name>``) names otherwise (spaces, dashes and case ignored)."""
    with open(path) as f:
        lines = [re.match(r"\s*(\d+)\s*:\s*(.+?)\s*$", line) for line in f]
    names = {int(m.group(1)): m.group(2) for m in lines if m}
    squash = re.compile(r"[\s_-]").sub
    bad = [
        f"{i}: expected {n!r}, labels.txt has {names.get(i)!r}"
        for i, n in CONTEXT59
        if squash("", names.get(i, "").lower()) != squash("", n.lower())
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


@dataclass
class ContextConversion:
    """What :func:`convert_pascal_context` did (``missing``: split ids without a .mat, left out)."""

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
    """The 60-class ``SegmentationClassContext/<id>.png`` (``out_dir``) and
    ``ImageSets/SegmentationContext/{train,val}.txt`` (:func:`read_split`) under VOC2010/.

    The ``<id>.mat`` folder: ``mat_dir``, else ``json_path`` if a folder, else ``trainval/`` next
    to the json, else ``VOC2010/trainval``. ``labels`` (default: next to or in that folder)
    is checked first (:func:`check_labels`, ValueError) unless not ``label_check``. Raises
    FileNotFoundError saying what to download when the label maps or the split are missing.
    """
    voc2010 = osp.join(devkit_path, "VOC2010")
    out_dir = out_dir or osp.join(voc2010, "SegmentationClassContext")
    candidates = [mat_dir, json_path if osp.isdir(json_path) else None]
    candidates += [osp.join(osp.dirname(json_path), "trainval"), osp.join(voc2010, "trainval")]
    mat_dir = next((p for p in candidates if p and osp.isdir(p) and _mats(p)), None)
    if mat_dir is None:
        raise FileNotFoundError(
            "PASCAL Context label maps (.mat) not found in "
            + ", ".join(p for p in dict.fromkeys(candidates) if p)
            + ". Download trainval.tar.gz of the PASCAL Context release "
            "(https://cs.stanford.edu/~roozbeh/pascal-context/) and extract it so that "
            f"{osp.join(voc2010, 'trainval')}/<image id>.mat exist (10,103 files), or pass "
            "--mat-dir. See data/README.md."
        )
    if not labels:
        near = [osp.join(osp.dirname(mat_dir), "labels.txt"), osp.join(mat_dir, "labels.txt")]
        labels = next((p for p in near if osp.isfile(p)), None)
    checked = labels if labels and label_check else None
    if checked:
        check_labels(checked)
    train, val, source = read_split(json_path, voc2010)
    available = set(_mats(mat_dir))
    splits = {}
    missing = {}
    for name, ids in (("train", train), ("val", val)):
        splits[name] = [i for i in ids if i in available]
        missing[name] = [i for i in ids if i not in available]
    os.makedirs(out_dir, exist_ok=True)
    work = partial(_mat_to_png, mat_dir=mat_dir, out_dir=out_dir, sbd=False)
    map_with_progress(
        work, splits["train"] + splits["val"], nproc, "Context .mat -> PNG", chunksize=32
    )
    for name, ids in splits.items():
        _write_list(osp.join(voc2010, "ImageSets", "SegmentationContext", f"{name}.txt"), ids)
    return ContextConversion(out_dir, mat_dir, checked, source, splits, missing)
