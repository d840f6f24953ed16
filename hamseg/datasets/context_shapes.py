"""Context Shapes: only a far flag's colour gives the grey players' team (docs/demo.md)."""

import os
import os.path as osp
import shutil
from dataclasses import asdict, dataclass
from glob import glob
from typing import Any, Callable, Optional

import cv2
import mmcv
import mmengine
import numpy as np
from mmseg.datasets import BaseSegDataset
from mmseg.registry import DATASETS
from tqdm import tqdm

DESIGN_VERSION = 1  # bumped whenever the same options would draw different images
SPLITS = ("train", "val")
TEAM_COLOURS = ((215, 45, 45), (40, 170, 70), (50, 95, 225))  # RGB; class 1 + t is team t
CLASSES = ("background", *(f"{c} {p}" for p in ("team", "flag") for c in ("red", "green", "blue")))
PALETTE = [[0, 0, 0], *map(list, TEAM_COLOURS), *([v // 2 for v in c] for c in TEAM_COLOURS)]
SIDES = ("left", "right", "top", "bottom")
SHAPES = ("circle", "square", "triangle", "diamond")
INFO_NAME = "context_shapes.json"
DIRS = ("img_dir", "ann_dir")


@dataclass
class ContextShapesConfig:
    """Generator options; ``label_flags``: the flag band is class ``<colour> flag``."""

    size: int = 128
    num_train: int = 400
    num_val: int = 100
    seed: int = 0
    min_objects: int = 2
    max_objects: int = 4
    flag_frac: float = 0.125
    object_frac: tuple[float, float] = (0.09, 0.15)
    label_flags: bool = True

    def to_json(self) -> dict[str, Any]:
        return dict(asdict(self), object_frac=[*self.object_frac], design_version=DESIGN_VERSION)


def shape_mask(shape: str, cx: float, cy: float, r: float, size: int) -> np.ndarray:
    """Boolean (size, size) mask of one player of the given shape, centre and radius."""
    mask = np.zeros((size, size), np.uint8)
    if shape == "circle":
        cv2.circle(mask, (int(round(cx)), int(round(cy))), int(round(r)), 1, thickness=-1)
        return mask.astype(bool)
    s, a, b = 0.85 * r, 0.95 * r, 0.75 * r
    corners = {
        "square": [[-s, -s], [s, -s], [s, s], [-s, s]],
        "triangle": [[0, -r], [a, b], [-a, b]],
        "diamond": [[0, -r], [r, 0], [0, r], [-r, 0]],
    }[shape]
    cv2.fillPoly(mask, [np.round(np.array(corners) + [cx, cy]).astype(np.int32)], 1)
    return mask.astype(bool)


def flag_region(side: str, size: int, flag_frac: float) -> tuple[slice, slice]:
    """(rows, cols) of the flag band on ``side``."""
    w = max(2, int(round(size * flag_frac)))
    band = slice(0, w) if side in ("left", "top") else slice(size - w, size)
    return (slice(0, size), band) if side in ("left", "right") else (band, slice(0, size))


def draw_sample(
    cfg: ContextShapesConfig, split: str, index: int, team: Optional[int] = None
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """RGB image, labels (``1 + team`` on the players), ``team`` and flag ``side`` of sample
    ``index`` of ``split``; a forced ``team`` changes only the flag's colour and the class."""
    rng = np.random.default_rng([DESIGN_VERSION, cfg.seed, SPLITS.index(split), index])
    size = cfg.size  # background: a random base colour, low-frequency blobs, pixel noise
    base = rng.uniform(70, 130) + rng.uniform(-12, 12, size=3)
    low = rng.normal(0.0, 14.0, size=(6, 6, 3)).astype(np.float32)
    low = cv2.resize(low, (size, size), interpolation=cv2.INTER_CUBIC)
    img = base[None, None, :] + low + rng.normal(0.0, 5.0, size=(size, size, 3))
    label = np.zeros((size, size), np.uint8)
    drawn_team = int(rng.integers(len(TEAM_COLOURS)))
    team = drawn_team if team is None else int(team)
    side = SIDES[int(rng.integers(len(SIDES)))]
    rows, cols = flag_region(side, size, cfg.flag_frac)
    flag_rgb = np.asarray(TEAM_COLOURS[team], np.float64) + rng.uniform(-15, 15, size=3)
    img[rows, cols] = flag_rgb + rng.normal(0.0, 6.0, size=img[rows, cols].shape)
    if cfg.label_flags:
        label[rows, cols] = 1 + len(TEAM_COLOURS) + team
    h = size // 2  # players go into the half opposite the flag
    x0, y0 = (h if side == "left" else 0), (h if side == "top" else 0)
    x1, y1 = (size - h if side == "right" else size), (size - h if side == "bottom" else size)
    n = int(rng.integers(cfg.min_objects, cfg.max_objects + 1))
    occupied, placed = np.zeros((size, size), bool), 0
    for _ in range(n * 30):  # rejection sampling of non-touching players
        if placed == n:
            break
        r = rng.uniform(cfg.object_frac[0] * size, cfg.object_frac[1] * size)
        cx, cy = rng.uniform(x0 + r + 1, x1 - r - 1), rng.uniform(y0 + r + 1, y1 - r - 1)
        shape = SHAPES[int(rng.integers(len(SHAPES)))]
        mask = shape_mask(shape, cx, cy, r, size)
        grown = cv2.dilate(mask.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
        if (grown & occupied).any():
            continue
        occupied |= mask
        grey = rng.uniform(185, 245)  # the player's look is independent of its team
        img[mask] = grey + rng.normal(0.0, 5.0, size=(int(mask.sum()), 1))
        label[mask], placed = 1 + team, placed + 1
    return np.clip(np.round(img), 0, 255).astype(np.uint8), label, dict(team=team, side=side)


def is_complete(out_dir: str, info_name: str, version: int, info: Optional[dict] = None) -> bool:
    """Whether ``out_dir`` holds the PNGs its ``info_name`` (``info``, if given) counts."""
    path = osp.join(out_dir, info_name)
    written = mmengine.load(path) if osp.isfile(path) else {}
    if written.get("design_version") != version or info not in (None, written):
        return False
    folders = [(osp.join(out_dir, d, s), written[f"num_{s}"]) for d in DIRS for s in SPLITS]
    return all(len(glob(osp.join(d, "*.png"))) == n for d, n in folders)


def write_dataset(root: str, name: str, info: dict, draw: Callable, progress: bool = True) -> dict:
    """``img_dir/<split>/NNNNNN.png`` and ``ann_dir/...`` of ``draw(split, index) -> (RGB image,
    labels)``, then ``info`` (an interrupted run is never complete), over an earlier run."""
    mmengine.dump({}, osp.join(root, name))  # no counts: incomplete until the end
    for folder in (osp.join(root, d, s) for d in DIRS for s in SPLITS):
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
    jobs = [(s, i) for s in SPLITS for i in range(info[f"num_{s}"])]
    for split, i in tqdm(jobs, desc=name[:-5], unit="img", disable=not progress):
        for sub, array in zip(DIRS, draw(split, i)):
            path = osp.join(root, sub, split, f"{i:06d}.png")
            array = cv2.cvtColor(array, cv2.COLOR_RGB2BGR) if array.ndim == 3 else array
            mmcv.imwrite(array, path, [cv2.IMWRITE_PNG_COMPRESSION, 3])  # the same bytes
    mmengine.dump(info, osp.join(root, name), indent=2)
    return info


def is_generated(out_dir: str, cfg: Optional[ContextShapesConfig] = None) -> bool:
    """Whether ``out_dir`` holds a complete dataset of this design version (and of ``cfg``)."""
    return is_complete(out_dir, INFO_NAME, DESIGN_VERSION, cfg.to_json() if cfg else None)


def generate_context_shapes(
    out_dir: str, cfg: Optional[ContextShapesConfig] = None, progress: bool = True
) -> dict[str, Any]:
    """Write the dataset of ``cfg`` into ``out_dir``; returns the options written there."""
    cfg = cfg or ContextShapesConfig()
    draw = lambda split, index: draw_sample(cfg, split, index)[:2]
    return write_dataset(out_dir, INFO_NAME, cfg.to_json(), draw, progress)


@DATASETS.register_module()
class ContextShapesDataset(BaseSegDataset):
    """The generated dataset: ``.png`` images and labels; 0 (background) is a class."""

    METAINFO = dict(classes=CLASSES, palette=PALETTE)

    def __init__(self, img_suffix: str = ".png", seg_map_suffix: str = ".png", **kwargs) -> None:
        super().__init__(img_suffix=img_suffix, seg_map_suffix=seg_map_suffix, **kwargs)
