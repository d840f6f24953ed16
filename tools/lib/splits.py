"""Split files for a flat layout (``tools/validate_dataset.py --write-splits``): every image of one
folder that has a label map, shuffled with a seed, a fraction to val, the rest to train, written
to the split files (``ann_file``) that the config's train and val datasets name. An existing
split file is never replaced. docs/custom_dataset.md, "Flat folders and split files".
"""

from __future__ import annotations

import os
import os.path as osp
from dataclasses import dataclass

import numpy as np
from mmengine.config import Config
from mmengine.fileio import list_dir_or_file

from hamseg.utils.config import split_datasets
from hamseg.utils.errors import UsageError
from hamseg.utils.messages import first_items

#: The splits it writes.
SPLITS = ("train", "val")
#: What a dataset config must share between train and val for one folder to be split.
SHARED = ("data_root", "data_prefix", "img_suffix", "seg_map_suffix")
#: Where the template's flat layout is described.
FLAT_LAYOUT = (
    "set split_dir (with img_dir and ann_dir naming the two folders) in your copy of "
    "configs/custom/hamhead-nmf_r18-d8_custom.py, or on the command line: --cfg-options "
    "split_dir=splits img_dir=images ann_dir=masks; docs/custom_dataset.md"
)


@dataclass
class SplitFiles:
    """What :func:`write_split_files` wrote: each split file with its names, and the images it
    left out (no label map)."""

    train: tuple[str, list[str]]
    val: tuple[str, list[str]]
    unlabelled: list[str]

    def summary(self) -> str:
        """One line: the two files and their counts, and the images left out."""
        line = (
            f"wrote {len(self.train[1])} names to {self.train[0]} and {len(self.val[1])} to "
            f"{self.val[0]}"
        )
        if self.unlabelled:
            line += (
                f"; {len(self.unlabelled)} image(s) without a label map left out "
                f"({first_items(self.unlabelled, 3)})"
            )
        return line


def _join(root: str | None, path: str) -> str:
    """``path`` joined with ``root`` unless absolute (mmengine's rule for dataset paths)."""
    path = osp.expanduser(path)
    return osp.join(osp.expanduser(root), path) if root and not osp.isabs(path) else path


def _flat_dataset(cfg: Config) -> tuple[dict, str, str]:
    """The train dataset config and the train and val split files, if train and val read the
    same folders through split files; else :class:`UsageError`."""
    found = {split: [leaf for _, leaf in split_datasets(cfg, (split,))] for split in SPLITS}
    if any(len(leaves) != 1 for leaves in found.values()):
        raise UsageError(
            "--write-splits needs one train and one val dataset (not a wrapper of several); "
            + FLAT_LAYOUT
        )
    (train,) = found["train"]
    (val,) = found["val"]
    files = [dataset.get("ann_file") for dataset in (train, val)]
    differ = [key for key in SHARED if train.get(key) != val.get(key)]
    if not all(files) or files[0] == files[1] or differ:
        why = (
            "train and val read different folders or suffixes (" + ", ".join(differ) + ")"
            if differ
            else "train and val do not each name their own split file (ann_file)"
        )
        raise UsageError(f"--write-splits is for a flat layout, and {why}: {FLAT_LAYOUT}")
    return train, _join(train.get("data_root"), files[0]), _join(val.get("data_root"), files[1])


def write_split_files(cfg: Config, val_fraction: float, seed: int = 0) -> SplitFiles:
    """Split the images of a flat layout into the config's train and val split files.

    Args:
        cfg: A config whose train and val datasets read the same image and label folders and
            name their split files (the custom template with ``split_dir`` set).
        val_fraction: The share of labelled images that goes to val, in (0, 1); at least one
            image goes to each split.
        seed: Seed of the shuffle (the same seed and images give the same split).

    Raises:
        UsageError: Not a flat layout, a split file exists, a bad fraction, fewer than two
            labelled images.
        FileNotFoundError: The image folder does not exist.
    """
    if not 0 < val_fraction < 1:
        raise UsageError(f"--val-fraction {val_fraction}: give a fraction between 0 and 1")
    dataset, train_file, val_file = _flat_dataset(cfg)
    existing = [path for path in (train_file, val_file) if osp.lexists(path)]
    if existing:
        raise UsageError(
            f"--write-splits: {existing[0]} exists and is kept (a split file is never replaced); "
            "delete it to write new splits, or set another split_dir"
        )
    root = dataset.get("data_root")
    prefix = dataset.get("data_prefix") or {}
    images = _join(root, prefix.get("img_path", ""))
    labels = _join(root, prefix.get("seg_map_path", ""))
    img_suffix = dataset.get("img_suffix", ".jpg")  # BaseSegDataset's defaults
    seg_suffix = dataset.get("seg_map_suffix", ".png")
    if not osp.isdir(images):
        raise FileNotFoundError(f"image folder not found: {images} (data_root, img_dir)")
    names = sorted(
        path[: -len(img_suffix)]
        for path in list_dir_or_file(images, list_dir=False, suffix=img_suffix, recursive=True)
    )
    labelled = [name for name in names if osp.isfile(osp.join(labels, name + seg_suffix))]
    if len(labelled) < 2:
        raise UsageError(
            f"--write-splits: {len(labelled)} image(s) of {images} (*{img_suffix}) have a label "
            f"map in {labels} (*{seg_suffix}); a split needs at least 2"
        )
    order = np.random.default_rng(seed).permutation(len(labelled))
    num_val = min(len(labelled) - 1, max(1, round(val_fraction * len(labelled))))
    val = sorted(labelled[i] for i in order[:num_val])
    train = sorted(labelled[i] for i in order[num_val:])
    for path, listed in ((train_file, train), (val_file, val)):
        os.makedirs(osp.dirname(path) or ".", exist_ok=True)
        with open(path, "x", encoding="utf-8") as f:  # "x": never over an existing file
            f.write("\n".join(listed) + "\n")
    kept = set(labelled)
    unlabelled = [name + img_suffix for name in names if name not in kept]
    return SplitFiles((train_file, train), (val_file, val), unlabelled)
