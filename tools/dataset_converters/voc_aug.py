"""Build PASCAL VOC 2012 "trainaug" (10,582 images) from the SBD release, in mmseg 1.x's layout.

    python tools/dataset_converters/voc_aug.py data/VOCdevkit data/VOCdevkit/VOCaug [--voc-labels]

Writes VOC2012/SegmentationClassAug/<id>.png and ImageSets/Segmentation/{aug,trainaug}.txt
(data/README.md); --voc-labels adds VOC's trainval labels, winning where SBD has the image too:
the release's 12,031 labels that stage 2 reads (docs/recipes.md).
"""

import argparse
import os
import os.path as osp
import sys
from contextlib import nullcontext
from functools import partial
from multiprocessing import Pool

import numpy as np
from PIL import Image
from scipy.io import loadmat
from tqdm import tqdm

TRAINAUG_LEN, VOC_TRAIN_LEN = 10582, 1464  # the real lists (paper App. D: 10,582 images)
RELEASE_AUG_LEN = 12031  # SBD's 11,355 maps + VOC's 2,913 trainval labels - 2,237 in both


class ConversionError(Exception):
    """A download file that cannot be converted: one line naming it (exit code 2)."""


def convert_all(work, ids: list[str], nproc: int, desc: str) -> list[str]:
    """``work(id)`` for every id, in ``nproc`` processes, with a progress bar."""
    with Pool(nproc) if nproc > 1 else nullcontext() as pool:
        done = pool.imap(work, ids, chunksize=32) if pool else map(work, ids)
        return list(tqdm(done, total=len(ids), desc=desc))


def read_list(path: str) -> list[str]:
    """The ids of a split file, one per line."""
    if not osp.isfile(path):
        raise FileNotFoundError(f"split file not found: {path}")
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def sbd_to_png(image_id: str, mat_dir: str, out_dir: str) -> str:
    """``<mat_dir>/<id>.mat`` (SBD's ``GTcls.Segmentation``, 0..20) -> ``<out_dir>/<id>.png``."""
    path = osp.join(mat_dir, image_id + ".mat")
    try:
        label = loadmat(path, squeeze_me=True, struct_as_record=False)["GTcls"]
    except KeyError:
        raise ConversionError(f"SBD class map {path!r} holds no 'GTcls' variable") from None
    except Exception as err:  # scipy raises several types for a damaged file
        reason = " ".join(f"{type(err).__name__}: {err}".split())
        raise ConversionError(
            f"SBD class map {path!r} cannot be read ({reason}); extract it again from the release"
        ) from None
    label = getattr(label, "Segmentation", None)
    if label is None or np.ndim(label) != 2:
        raise ConversionError(f"SBD class map {path!r} holds no 2-D GTcls.Segmentation")
    Image.fromarray(np.asarray(label).astype(np.uint8)).save(osp.join(out_dir, image_id + ".png"))
    return image_id


def copy_voc_label(image_id: str, voc_dir: str, out_dir: str) -> str:
    """VOC's palette PNG (class indices, 255 at object borders) as a grayscale PNG."""
    path = osp.join(voc_dir, image_id + ".png")
    try:
        with Image.open(path) as image:
            mode, label = image.mode, np.array(image)
    except OSError as err:
        raise ConversionError(f"VOC label {path!r} cannot be read ({err})") from None
    if label.ndim != 2 or mode not in ("P", "L"):
        raise ConversionError(
            f"VOC label {path!r} is a {mode!r}-mode image: VOC 2012's SegmentationClass PNGs hold "
            "class indices (palette mode); extract it again from VOCtrainval_11-May-2012.tar"
        )
    if bad := sorted(set(np.unique(label).tolist()) - set(range(21)) - {255}):
        raise ConversionError(f"VOC label {path!r} holds values {bad} outside 0..20 and 255")
    Image.fromarray(label.astype(np.uint8)).save(osp.join(out_dir, image_id + ".png"))
    return image_id


def main() -> None:
    parser = argparse.ArgumentParser(description="Build VOC 2012 trainaug from SBD (mmseg layout)")
    parser.add_argument("devkit_path", help="VOCdevkit folder holding VOC2012/")
    parser.add_argument("aug_path", help="extracted SBD release (holds dataset/cls/*.mat)")
    parser.add_argument("-o", "--out_dir", help="default: <devkit>/VOC2012/SegmentationClassAug")
    parser.add_argument("--nproc", type=int, default=1, help="worker processes")
    parser.add_argument(
        "--voc-labels",
        action="store_true",
        help="also write VOC 2012's trainval labels (VOC's wins over SBD's on shared images)",
    )
    args = parser.parse_args()
    voc = osp.join(args.devkit_path, "VOC2012")
    sets = osp.join(voc, "ImageSets", "Segmentation")
    mat_dir = osp.join(args.aug_path, "dataset", "cls")
    out_dir = args.out_dir or osp.join(voc, "SegmentationClassAug")
    if not osp.isdir(mat_dir):
        raise FileNotFoundError(
            f"SBD class maps not found: {mat_dir}. Download the SBD release (benchmark.tgz, "
            "http://home.bharathh.info/pubs/codes/SBD/download.html) and extract its "
            f"benchmark_RELEASE folder as {args.aug_path} (see data/README.md)."
        )
    train, val = (set(read_list(osp.join(sets, f"{s}.txt"))) for s in ("train", "val"))
    trainval = read_list(osp.join(sets, "trainval.txt")) if args.voc_labels else []
    sbd = {i for s in ("train", "val") for i in read_list(f"{args.aug_path}/dataset/{s}.txt")}
    os.makedirs(out_dir, exist_ok=True)
    work = partial(sbd_to_png, mat_dir=mat_dir, out_dir=out_dir)
    ids = sorted(n[:-4] for n in os.listdir(mat_dir) if n.endswith(".mat"))
    converted = convert_all(work, ids, args.nproc, "SBD .mat -> PNG")
    if missing := sorted(sbd - set(converted)):
        raise FileNotFoundError(
            f"{len(missing)} SBD images of dataset/train.txt + val.txt have no .mat in "
            f"{mat_dir}, e.g. {missing[:5]}"
        )
    work = partial(copy_voc_label, voc_dir=osp.join(voc, "SegmentationClass"), out_dir=out_dir)
    written = convert_all(work, trainval, args.nproc, "VOC labels -> PNG")
    lists = {"aug": sbd - train - val, "trainaug": (train | sbd) - val}
    for name, listed in lists.items():
        with open(osp.join(sets, f"{name}.txt"), "w") as f:
            f.writelines(i + "\n" for i in sorted(listed))
    both = len(set(written) & set(converted))
    labels = len(converted) + len(written) - both
    print(
        f"{labels} PNGs in {out_dir}; aug.txt: {len(lists['aug'])} images, trainaug.txt: "
        f"{len(lists['trainaug'])} images (VOC train {len(train)} + aug {len(lists['aug'])})."
    )
    if args.voc_labels:
        line = f"SBD {len(converted)} + VOC trainval {len(written)} labels, {both} images in both"
        print(f"{line}: VOC's label kept.")
    got = (len(lists["trainaug"]), len(train), labels if args.voc_labels else RELEASE_AUG_LEN)
    if got != (TRAINAUG_LEN, VOC_TRAIN_LEN, RELEASE_AUG_LEN):
        full = f"trainaug {TRAINAUG_LEN}, VOC train {VOC_TRAIN_LEN}"
        full += f", {RELEASE_AUG_LEN} labels" * args.voc_labels
        print(f"warning: the full VOC 2012 + SBD data give {full}; got {got}", file=sys.stderr)


if __name__ == "__main__":
    try:
        main()
    except (ConversionError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
