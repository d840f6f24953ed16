"""PASCAL Context label maps (59 classes + background) in mmseg 1.x's layout, without ``detail``.

mmseg's converter reads the Detail API's ``trainval_merged.json`` through the ``detail`` package,
which is not on PyPI. :func:`convert_pascal_context` needs neither: it reads the per-image label
maps of the original PASCAL Context release (Mottaghi et al., ``trainval.tar.gz`` from
https://cs.stanford.edu/~roozbeh/pascal-context/, extracted as ``data/VOCdevkit/VOC2010/trainval/``:
one ``<id>.mat`` per image with a ``LabelMap`` of the 459 full-label ids, 1-based indices into the
release's ``labels.txt``, 0 for unlabelled pixels) and maps them to the 60-class benchmark: each of
the 59 classes below gets its rank 1..59 in id order (= mmseg's class order), every other id and
0 become background 0.

The split (train 4,998 / val 5,105 images) is taken from the json when it exists (its ``images``
carry ``file_name`` and ``phase``); without it from VOC 2010's ``ImageSets/Main/{train,val}.txt``,
which is the same split. The json's annotations are not read.

Output, under ``data/VOCdevkit/VOC2010``: ``SegmentationClassContext/<id>.png`` (uint8, 0..59) and
``ImageSets/SegmentationContext/{train,val}.txt``, as mmseg's converter writes them. mmseg's
``PascalContextDataset`` (60 classes) and ``PascalContextDataset59`` (background ignored) both
read these files.

If the release's ``labels.txt`` is found next to the ``trainval`` folder (or given with
``--labels``), the class names at the 59 ids are checked against it before anything is written.
"""

from __future__ import annotations

import json
import os
import os.path as osp
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Optional

import numpy as np
from PIL import Image

from hamseg.datasets.converters.mat_files import read_mat_field
from hamseg.datasets.samples import InvalidSampleError
from hamseg.utils.progress_map import map_with_progress

__all__ = [
    "CONTEXT59",
    "NUM_FULL_LABELS",
    "ContextConversion",
    "check_labels",
    "convert_one",
    "convert_pascal_context",
    "find_labels_txt",
    "find_mat_dir",
    "lookup_table",
    "read_labels_txt",
    "read_split",
    "to_context60",
]

#: The 59 classes of the PASCAL Context benchmark as ids of the 459-label set (labels.txt
#: numbering, the ids mmseg's converter maps from); sorted by id, which is also alphabetical and
#: equals the order of mmseg's ``PascalContextDataset59`` classes.
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

DOWNLOAD_HELP = (
    "Download trainval.tar.gz of the PASCAL Context release "
    "(https://cs.stanford.edu/~roozbeh/pascal-context/) and extract it so that "
    "{where}/<image id>.mat exist (10,103 files), or pass --mat-dir. See data/README.md."
)


def lookup_table() -> np.ndarray:
    """(460,) uint8: full-label id -> 60-class label (0 background, 1..59 the classes)."""
    lut = np.zeros(NUM_FULL_LABELS + 1, np.uint8)
    for rank, (full_id, _) in enumerate(CONTEXT59, start=1):
        lut[full_id] = rank
    return lut


def to_context60(label_map: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """Map a full-label ``LabelMap`` (H, W) to 0..59.

    Raises:
        ValueError: On ids outside 0..459.
    """
    label_map = np.asarray(label_map)
    if label_map.size and (label_map.min() < 0 or label_map.max() > NUM_FULL_LABELS):
        raise ValueError(
            f"LabelMap values must be in 0..{NUM_FULL_LABELS}, got "
            f"{label_map.min()}..{label_map.max()}"
        )
    return lut[label_map.astype(np.int64)]


def convert_one(image_id: str, mat_dir: str, out_dir: str, lut: np.ndarray) -> str:
    """``mat_dir/<id>.mat`` -> ``out_dir/<id>.png``; returns the id.

    Raises:
        InvalidSampleError: One line naming a file that cannot be read or holds ids outside
            0..459.
    """
    path = osp.join(mat_dir, image_id + ".mat")
    label_map = read_mat_field(path, "LabelMap", "PASCAL Context label map")
    try:
        converted = to_context60(label_map, lut)
    except ValueError as err:
        raise InvalidSampleError(f"PASCAL Context label map {path!r}: {err}") from None
    Image.fromarray(converted).save(osp.join(out_dir, image_id + ".png"))
    return image_id


def read_labels_txt(path: str) -> dict[int, str]:
    """``{id: name}`` from the release's ``labels.txt`` (lines ``<id>: <name>``)."""
    names = {}
    with open(path) as f:
        for line in f:
            match = re.match(r"\s*(\d+)\s*:\s*(.+?)\s*$", line)
            if match:
                names[int(match.group(1))] = match.group(2)
    return names


def check_labels(names: Mapping[int, str]) -> None:
    """Check that ``labels.txt`` names the 59 ids as :data:`CONTEXT59` (spaces and case ignored).

    Raises:
        ValueError: Listing every id whose name differs.
    """

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
    """``(train ids, val ids, source)`` from the Detail json if present, else VOC 2010 Main."""
    if osp.isfile(json_path):
        with open(json_path) as f:
            images = json.load(f).get("images", [])
        split: dict[str, list[str]] = {"train": [], "val": []}
        for image in images:
            phase = image.get("phase")
            if phase in split and "file_name" in image:
                split[phase].append(osp.splitext(image["file_name"])[0])
        if split["train"] and split["val"]:
            return sorted(split["train"]), sorted(split["val"]), json_path
    main = osp.join(voc2010, "ImageSets", "Main")
    files = [osp.join(main, f"{s}.txt") for s in ("train", "val")]
    if not all(osp.isfile(f) for f in files):
        raise FileNotFoundError(
            f"no train/val split: neither {json_path} (with images[].phase) nor {files[0]} and "
            f"{files[1]} (the VOC 2010 trainval release) exist"
        )
    ids = []
    for path in files:
        with open(path) as f:
            ids.append(sorted(line.split()[0] for line in f if line.strip()))
    return ids[0], ids[1], main


def find_mat_dir(json_path: str, voc2010: str, mat_dir: Optional[str] = None) -> str:
    """The folder with the ``<id>.mat`` label maps: ``mat_dir`` if given, else ``json_path`` if
    it is a folder, else ``trainval/`` next to the json, else ``<voc2010>/trainval``.

    Raises:
        FileNotFoundError: Listing the folders searched and what to download.
    """
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
        + ". "
        + DOWNLOAD_HELP.format(where=osp.join(voc2010, "trainval"))
    )


def find_labels_txt(mat_dir: str) -> Optional[str]:
    """The release's ``labels.txt`` next to the ``.mat`` folder or inside it, if present."""
    for path in (osp.join(osp.dirname(mat_dir), "labels.txt"), osp.join(mat_dir, "labels.txt")):
        if osp.isfile(path):
            return path
    return None


@dataclass
class ContextConversion:
    """What :func:`convert_pascal_context` did.

    Attributes:
        out_dir: The PNG folder.
        mat_dir: The folder the label maps were read from.
        labels_checked: The ``labels.txt`` the class ids were checked against, if any.
        source: Where the split came from (the json, or VOC 2010's ImageSets/Main).
        splits: ``{'train': ids, 'val': ids}`` converted and listed.
        missing: Per split, the ids of the split source without a ``.mat`` (left out).
    """

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
        mat_dir: Folder of the release's ``<id>.mat`` files (default: see :func:`find_mat_dir`).
        labels: The release's ``labels.txt`` (default: found next to the .mat folder).
        label_check: Check the 59 class ids against ``labels.txt`` before writing anything.
        nproc: Worker processes.

    Raises:
        FileNotFoundError: If the label maps or the split are missing.
        ValueError: If ``labels.txt`` names the 59 ids otherwise (see :func:`check_labels`).
    """
    voc2010 = osp.join(devkit_path, "VOC2010")
    out_dir = out_dir or osp.join(voc2010, "SegmentationClassContext")
    mat_dir = find_mat_dir(json_path, voc2010, mat_dir)
    labels = labels or find_labels_txt(mat_dir)
    checked = None
    if labels and label_check:
        check_labels(read_labels_txt(labels))
        checked = labels
    train, val, source = read_split(json_path, voc2010)
    available = {osp.splitext(n)[0] for n in os.listdir(mat_dir) if n.endswith(".mat")}
    splits, missing = {}, {}
    for name, ids in (("train", train), ("val", val)):
        missing[name] = [i for i in ids if i not in available]
        splits[name] = [i for i in ids if i in available]

    os.makedirs(out_dir, exist_ok=True)
    work = partial(convert_one, mat_dir=mat_dir, out_dir=out_dir, lut=lookup_table())
    todo = splits["train"] + splits["val"]
    map_with_progress(work, todo, nproc, "Context .mat -> PNG", chunksize=32)

    sets = osp.join(voc2010, "ImageSets", "SegmentationContext")
    os.makedirs(sets, exist_ok=True)
    for name, ids in splits.items():
        with open(osp.join(sets, f"{name}.txt"), "w") as f:
            f.writelines(i + "\n" for i in sorted(ids))
    return ContextConversion(out_dir, mat_dir, checked, source, splits, missing)
