"""Writing and checking a generated dataset in mmseg's layout (the demo tasks share it).

``img_dir/{train,val}/NNNNNN.png`` (RGB), ``ann_dir/...`` (uint8 labels) and an info JSON with
the generator's options, written last, so that an interrupted run is never taken as complete.
"""

from __future__ import annotations

import json
import os
import os.path as osp
from typing import Any, Callable, Optional

import cv2
import numpy as np
from tqdm import tqdm

SPLITS = ("train", "val")
DIRS = ("img_dir", "ann_dir")
#: ``draw(split, index) -> (RGB image, label map)``
DrawFn = Callable[[str, int], tuple[np.ndarray, np.ndarray]]


def is_complete(
    out_dir: str, info_name: str, design_version: int, info: Optional[dict[str, Any]] = None
) -> bool:
    """Whether ``out_dir`` holds every file its ``info_name`` JSON counts, drawn by generator
    ``design_version`` (and with the options ``info``, when given)."""
    info_path = osp.join(out_dir, info_name)
    if not osp.isfile(info_path):
        return False
    with open(info_path, encoding="utf-8") as f:
        written = json.load(f)
    if written.get("design_version") != design_version or info is not None and written != info:
        return False  # other options or another generator version draw different images
    folders = [(osp.join(out_dir, sub, s), written[f"num_{s}"]) for s in SPLITS for sub in DIRS]
    return all(
        osp.isdir(d) and sum(p.endswith(".png") for p in os.listdir(d)) == n for d, n in folders
    )


def write_dataset(
    out_dir: str, info_name: str, info: dict[str, Any], draw: DrawFn, progress: bool = True
) -> dict[str, Any]:
    """Write ``info["num_train"]`` and ``info["num_val"]`` samples of ``draw``, then ``info`` to
    ``<out_dir>/<info_name>``; files of a larger earlier run are removed. Returns ``info``.

    Raises:
        OSError: An image could not be written.
    """
    info_path = osp.join(out_dir, info_name)
    if osp.exists(info_path):
        os.remove(info_path)
    counts = {s: int(info[f"num_{s}"]) for s in SPLITS}
    for split in SPLITS:
        for sub in DIRS:
            d = osp.join(out_dir, sub, split)
            os.makedirs(d, exist_ok=True)
            for p in os.listdir(d):  # stale files of a larger previous run
                if p.endswith(".png") and int(p[:-4]) >= counts[split]:
                    os.remove(osp.join(d, p))
    jobs = [(s, i) for s in SPLITS for i in range(counts[s])]
    name = osp.splitext(info_name)[0].replace("_", " ")
    for split, i in tqdm(jobs, desc=name, unit="img", disable=not progress):
        for sub, array in zip(DIRS, draw(split, i)):  # fixed compression: the same bytes
            path = osp.join(out_dir, sub, split, f"{i:06d}.png")
            array = cv2.cvtColor(array, cv2.COLOR_RGB2BGR) if array.ndim == 3 else array
            if not cv2.imwrite(path, array, [cv2.IMWRITE_PNG_COMPRESSION, 3]):
                raise OSError(f"could not write {path}")
    with open(info_path, "w", encoding="utf-8") as f:
        json.dump(info, f, indent=2)
    return info
