"""Split files for a flat layout (tools/validate_dataset.py --write-splits)."""

import os
import os.path as osp

import numpy as np
from mmengine.config import Config
from mmengine.fileio import list_dir_or_file

from hamseg.utils.config import split_datasets
from hamseg.utils.errors import UsageError, first_items

from .checks import data_path


def write_split_files(cfg: Config, val_fraction: float = 0.2, seed: int = 0) -> str:
    """Write a seeded ``val_fraction`` (at least one) of the labelled images of train's folder
    to val's ``ann_file``, the rest to train's, never over a file; returns what was written."""
    if not 0 < val_fraction < 1:
        raise UsageError(f"--val-fraction {val_fraction}: give a fraction between 0 and 1")
    (_, train), (_, val) = [next(split_datasets(cfg, (s,)), (s, {})) for s in ("train", "val")]
    if len({train.get("ann_file"), val.get("ann_file")} - {None, ""}) != 2:
        raise UsageError(
            "--write-splits is for a flat layout: set split_dir (img_dir and ann_dir naming the "
            "two folders) in your copy of configs/custom/hamhead-nmf_r18-d8_custom.py"
        )
    files = [data_path(train, train["ann_file"]), data_path(val, val["ann_file"])]
    if existing := [f for f in files if osp.lexists(f)]:
        raise UsageError(f"--write-splits: {existing[0]} exists and is kept; delete it or move it")
    prefix = train.get("data_prefix") or {}
    images = data_path(train, prefix.get("img_path", ""))
    labels = data_path(train, prefix.get("seg_map_path", ""))
    img_suffix, seg_suffix = train.get("img_suffix", ".jpg"), train.get("seg_map_suffix", ".png")
    found = list_dir_or_file(images, list_dir=False, suffix=img_suffix, recursive=True)
    names = sorted(name[: -len(img_suffix)] for name in found)
    labelled = [n for n in names if osp.isfile(osp.join(labels, n + seg_suffix))]
    if len(labelled) < 2:
        raise UsageError(
            f"--write-splits: {len(labelled)} image(s) of {images} (*{img_suffix}) have a label "
            f"map in {labels} (*{seg_suffix}); a split needs at least 2"
        )
    order = np.random.default_rng(seed).permutation(len(labelled))
    num_val = min(len(labelled) - 1, max(1, round(val_fraction * len(labelled))))
    chosen = [sorted(labelled[i] for i in part) for part in (order[num_val:], order[:num_val])]
    for file, listed in zip(files, chosen):
        os.makedirs(osp.dirname(file) or ".", exist_ok=True)
        with open(file, "x", encoding="utf-8") as f:
            f.write("\n".join(listed) + "\n")
    line = f"wrote {len(chosen[0])} names to {files[0]} and {len(chosen[1])} to {files[1]}"
    if left := [n + img_suffix for n in names if n not in labelled]:
        line += f"; {len(left)} image(s) without a label map left out ({first_items(left, 3)})"
    return line
