"""PASCAL Context label maps (59 classes + background) in mmseg 1.x's layout, without ``detail``.

    python tools/dataset_converters/pascal_context.py data/VOCdevkit \\
        data/VOCdevkit/VOC2010/trainval_merged.json

mmseg's command line, reading the release's per-image .mat label maps (trainval.tar.gz extracted
as VOC2010/trainval/) instead of the Detail API: VOC2010/SegmentationClassContext/<id>.png (0..59)
and ImageSets/SegmentationContext/{train,val}.txt; ids checked against labels.txt (data/README.md).
"""

import argparse
import json
import os
import os.path as osp
import re
import sys
from contextlib import nullcontext
from functools import partial
from multiprocessing import Pool

import numpy as np
from PIL import Image
from scipy.io import loadmat
from tqdm import tqdm

#: The 59 classes of mmseg's PascalContextDataset59, in its order, and their ids in labels.txt.
NAMES = "aeroplane bag bed bedclothes bench bicycle bird boat book bottle building bus cabinet car"
NAMES += " cat ceiling chair cloth computer cow cup curtain dog door fence floor flower food grass"
NAMES += " ground horse keyboard light motorbike mountain mouse person plate platform pottedplant"
NAMES += " road rock sheep shelves sidewalk sign sky snow sofa table track train tree truck"
NAMES += " tvmonitor wall water window wood"
IDS = "2 9 18 19 22 23 25 31 33 34 44 45 46 59 65 68 72 80 85 98 104 105 113 115 144 158 159 162"
IDS += " 187 189 207 220 232 258 259 260 284 295 296 308 324 326 347 349 354 355 360 366 368 397"
IDS += " 415 416 420 424 427 440 445 454 458"
CONTEXT59 = list(zip(map(int, IDS.split()), NAMES.split()))
LUT = np.zeros(460, np.uint8)  # full-label id -> 0 (background) .. 59
LUT[[i for i, _ in CONTEXT59]] = np.arange(1, 60)


class ConversionError(Exception):
    """A download file that cannot be converted: one line naming it (exit code 2)."""


def mat_to_png(image_id: str, mat_dir: str, out_dir: str) -> None:
    """``<mat_dir>/<id>.mat`` (``LabelMap``, ids 0..459) -> ``<out_dir>/<id>.png`` (0..59)."""
    path = osp.join(mat_dir, image_id + ".mat")
    what = f"PASCAL Context label map {path!r}"
    try:
        label = np.asarray(loadmat(path)["LabelMap"])
    except KeyError:
        raise ConversionError(f"{what} holds no 'LabelMap' variable") from None
    except Exception as err:  # scipy raises several types for a damaged file
        reason = " ".join(f"{type(err).__name__}: {err}".split())
        raise ConversionError(f"{what} cannot be read ({reason})") from None
    if label.size and (label.min() < 0 or label.max() > 459):
        raise ConversionError(
            f"{what}: LabelMap values must be in 0..459, got {label.min()}..{label.max()}"
        )
    Image.fromarray(LUT[label.astype(np.int64)]).save(osp.join(out_dir, image_id + ".png"))


def check_labels(path: str) -> None:
    """Refuse a labels.txt (``<id>: <name>`` lines) that names an id of CONTEXT59 otherwise."""
    with open(path) as f:
        found = [re.match(r"\s*(\d+)\s*:\s*(.+?)\s*$", line) for line in f]
    names = {int(m.group(1)): m.group(2) for m in found if m}
    squash = re.compile(r"[\s_-]").sub  # spaces, dashes and case are ignored
    bad = [
        f"{i}: expected {n!r}, labels.txt has {names.get(i)!r}"
        for i, n in CONTEXT59
        if squash("", names.get(i, "").lower()) != squash("", n.lower())
    ]
    if bad:
        raise ConversionError(
            f"{path} names other classes ({'; '.join(bad)}); --no-label-check skips"
        )


def read_split(json_path: str, voc2010: str) -> tuple[dict[str, list[str]], str]:
    """The train/val ids: the Detail json's ``images[].phase``, else VOC 2010's Main lists."""
    split: dict[str, list[str]] = {"train": [], "val": []}
    if osp.isfile(json_path):
        with open(json_path) as f:
            for image in json.load(f).get("images", []):
                split.get(image.get("phase"), []).append(osp.splitext(image["file_name"])[0])
        if split["train"] and split["val"]:
            return {s: sorted(ids) for s, ids in split.items()}, json_path
    main = osp.join(voc2010, "ImageSets", "Main")
    for name in split:
        if not osp.isfile(path := osp.join(main, f"{name}.txt")):
            raise FileNotFoundError(f"no train/val split: neither {json_path} nor {path} exist")
        with open(path) as f:
            split[name] = sorted(line.split()[0] for line in f if line.strip())
    return split, main


def main() -> None:
    parser = argparse.ArgumentParser(description="PASCAL Context label maps in mmseg's layout")
    parser.add_argument("devkit_path", help="VOCdevkit folder holding VOC2010/")
    parser.add_argument("json_path", help="Detail trainval_merged.json (its train/val split)")
    parser.add_argument("-o", "--out_dir", help="default: VOC2010/SegmentationClassContext")
    parser.add_argument("--mat-dir", help="folder of the <id>.mat (default: VOC2010/trainval)")
    parser.add_argument("--labels", help="the release's labels.txt (default: next to mat-dir)")
    parser.add_argument("--no-label-check", action="store_true", help="skip the labels.txt check")
    parser.add_argument("--nproc", type=int, default=1, help="worker processes")
    args = parser.parse_args()
    voc2010 = osp.join(args.devkit_path, "VOC2010")
    out_dir = args.out_dir or osp.join(voc2010, "SegmentationClassContext")
    mat_dir = args.mat_dir or osp.join(voc2010, "trainval")
    if not osp.isdir(mat_dir):
        raise FileNotFoundError(
            f"PASCAL Context label maps (.mat) not found in {mat_dir}. Download trainval.tar.gz "
            "of the PASCAL Context release (https://cs.stanford.edu/~roozbeh/pascal-context/) "
            f"and extract it as {osp.join(voc2010, 'trainval')}/<image id>.mat (10,103 files), "
            "or pass --mat-dir. See data/README.md."
        )
    labels = args.labels or osp.join(osp.dirname(mat_dir), "labels.txt")
    if osp.isfile(labels) and not args.no_label_check:
        check_labels(labels)
        print(f"class ids checked against {labels}")
    split, source = read_split(args.json_path, voc2010)
    available = {n[:-4] for n in os.listdir(mat_dir) if n.endswith(".mat")}
    lists = osp.join(voc2010, "ImageSets", "SegmentationContext")
    os.makedirs(lists, exist_ok=True)
    for name, ids in split.items():
        if missing := [i for i in ids if i not in available]:
            where = f"{name} images of {source} have no .mat in {mat_dir}"
            print(f"warning: {len(missing)} {where}, e.g. {missing[:3]}", file=sys.stderr)
        split[name] = [i for i in ids if i in available]
        with open(osp.join(lists, f"{name}.txt"), "w") as f:
            f.writelines(i + "\n" for i in split[name])
    os.makedirs(out_dir, exist_ok=True)
    work = partial(mat_to_png, mat_dir=mat_dir, out_dir=out_dir)
    ids = split["train"] + split["val"]
    with Pool(args.nproc) if args.nproc > 1 else nullcontext() as pool:
        done = pool.imap(work, ids, chunksize=32) if pool else map(work, ids)
        list(tqdm(done, total=len(ids), desc="Context .mat -> PNG"))
    print(
        f"{len(ids)} PNGs in {out_dir}; train {len(split['train'])}, val {len(split['val'])} "
        f"images (split from {source}; the full data give 4998 / 5105)."
    )


if __name__ == "__main__":
    try:
        main()
    except (ConversionError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
