"""Context Shapes: a generated dataset where only global context decides the class.

Grey "players" look alike whatever their team; the team (class) is given only by the colour of a
flag on the far side of the image. Sample ``i`` of split ``s`` is drawn from a generator seeded
with ``(design version, seed, s, i)``: the same options write the same bytes. docs/demo.md.
"""

from __future__ import annotations

import json
import os
import os.path as osp
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import cv2
import numpy as np
from mmseg.datasets import BaseSegDataset
from mmseg.registry import DATASETS

__all__ = [
    "CLASSES",
    "PALETTE",
    "TEAM_COLOURS",
    "ContextShapesConfig",
    "ContextShapesDataset",
    "draw_sample",
    "generate_context_shapes",
    "read_flag_team",
    "write_preview",
]

#: Version of the design; bumped whenever the same options would draw different images.
DESIGN_VERSION = 1

#: RGB colour of each team's flag, in class order (class ``1 + t`` is team ``t``).
TEAM_COLOURS: tuple[tuple[int, int, int], ...] = ((215, 45, 45), (40, 170, 70), (50, 95, 225))
#: Class names, index = label value in the ann_dir PNGs.
CLASSES: tuple[str, ...] = (
    "background",
    "red team",
    "green team",
    "blue team",
    "red flag",
    "green flag",
    "blue flag",
)
#: Label colours for visualisation: players in the team colour, flags in a darker shade.
PALETTE: list[list[int]] = (
    [[0, 0, 0]] + [list(c) for c in TEAM_COLOURS] + [[c // 2 for c in t] for t in TEAM_COLOURS]
)

SIDES = ("left", "right", "top", "bottom")
SHAPES = ("circle", "square", "triangle", "diamond")
SPLITS = ("train", "val")


@dataclass
class ContextShapesConfig:
    """Options of the generator: image side (pixels), images per split, seed, players per
    image, flag band width and players' radius range (fractions of ``size``), and whether the
    flag band gets its own class (``<colour> flag``) or is background."""

    size: int = 128
    num_train: int = 400
    num_val: int = 100
    seed: int = 0
    min_objects: int = 2
    max_objects: int = 4
    flag_frac: float = 0.125
    object_frac: tuple[float, float] = field(default=(0.09, 0.15))
    label_flags: bool = True

    def to_json(self) -> dict[str, Any]:
        """The options plus the design version, as written to ``context_shapes.json``."""
        d = asdict(self)
        d["object_frac"] = list(self.object_frac)
        d["design_version"] = DESIGN_VERSION
        return d


def _background(rng: np.random.Generator, size: int) -> np.ndarray:
    """Smooth grey-brown clutter: a random base colour, low-frequency blobs and pixel noise."""
    base = rng.uniform(70, 130) + rng.uniform(-12, 12, size=3)
    low = rng.normal(0.0, 14.0, size=(6, 6, 3)).astype(np.float32)
    low = cv2.resize(low, (size, size), interpolation=cv2.INTER_CUBIC)
    img = base[None, None, :] + low + rng.normal(0.0, 5.0, size=(size, size, 3))
    return img


def _shape_mask(shape: str, cx: float, cy: float, r: float, size: int) -> np.ndarray:
    """Boolean mask of one player of the given shape, centre and radius."""
    mask = np.zeros((size, size), np.uint8)
    c = (int(round(cx)), int(round(cy)))
    ri = int(round(r))
    if shape == "circle":
        cv2.circle(mask, c, ri, 1, thickness=-1)
    elif shape == "square":
        s = r * 0.85
        pts = np.array([[cx - s, cy - s], [cx + s, cy - s], [cx + s, cy + s], [cx - s, cy + s]])
        cv2.fillPoly(mask, [np.round(pts).astype(np.int32)], 1)
    elif shape == "triangle":
        pts = np.array(
            [[cx, cy - r], [cx + 0.95 * r, cy + 0.75 * r], [cx - 0.95 * r, cy + 0.75 * r]]
        )
        cv2.fillPoly(mask, [np.round(pts).astype(np.int32)], 1)
    elif shape == "diamond":
        pts = np.array([[cx, cy - r], [cx + r, cy], [cx, cy + r], [cx - r, cy]])
        cv2.fillPoly(mask, [np.round(pts).astype(np.int32)], 1)
    else:  # pragma: no cover - guarded by SHAPES
        raise ValueError(f"unknown shape {shape!r}")
    return mask.astype(bool)


def flag_region(side: str, size: int, flag_frac: float) -> tuple[slice, slice]:
    """(rows, cols) slices of the flag band on ``side``."""
    w = max(2, int(round(size * flag_frac)))
    full = slice(0, size)
    return {
        "left": (full, slice(0, w)),
        "right": (full, slice(size - w, size)),
        "top": (slice(0, w), full),
        "bottom": (slice(size - w, size), full),
    }[side]


def object_region(side: str, size: int) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1) of the half of the image opposite the flag, where players are placed."""
    h = size // 2
    return {
        "left": (h, 0, size, size),
        "right": (0, 0, size - h, size),
        "top": (0, h, size, size),
        "bottom": (0, 0, size, size - h),
    }[side]


def draw_sample(
    rng: np.random.Generator, cfg: ContextShapesConfig, team: Optional[int] = None
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Draw one image, its label map and a description of what was drawn.

    Args:
        rng: Source of randomness (consumed).
        cfg: Generator options.
        team: Force this team instead of drawing one; the same random numbers are consumed, so
            only the flag's colour and the players' class change (the cue alone decides).

    Returns:
        ``(img, label, meta)``: RGB uint8 (size, size, 3); uint8 labels (size, size), ``1 + team``
        on every player; meta with ``team``, ``side`` and the ``objects`` drawn.
    """
    size = cfg.size
    img = _background(rng, size)
    label = np.zeros((size, size), np.uint8)

    drawn_team = int(rng.integers(len(TEAM_COLOURS)))
    team = drawn_team if team is None else int(team)
    side = SIDES[int(rng.integers(len(SIDES)))]
    rows, cols = flag_region(side, size, cfg.flag_frac)
    flag_rgb = np.asarray(TEAM_COLOURS[team], np.float64) + rng.uniform(-15, 15, size=3)
    fh = rows.stop - rows.start
    fw = cols.stop - cols.start
    img[rows, cols] = flag_rgb + rng.normal(0.0, 6.0, size=(fh, fw, 3))
    if cfg.label_flags:
        label[rows, cols] = 1 + len(TEAM_COLOURS) + team

    x0, y0, x1, y1 = object_region(side, size)
    n = int(rng.integers(cfg.min_objects, cfg.max_objects + 1))
    rmin, rmax = cfg.object_frac[0] * size, cfg.object_frac[1] * size
    objects: list[dict[str, Any]] = []
    occupied = np.zeros((size, size), bool)
    for _ in range(n * 30):  # rejection sampling of non-touching players
        if len(objects) == n:
            break
        r = rng.uniform(rmin, rmax)
        cx = rng.uniform(x0 + r + 1, x1 - r - 1)
        cy = rng.uniform(y0 + r + 1, y1 - r - 1)
        shape = SHAPES[int(rng.integers(len(SHAPES)))]
        mask = _shape_mask(shape, cx, cy, r, size)
        grown = cv2.dilate(mask.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
        if (grown & occupied).any():
            continue
        occupied |= mask
        # The player's look is independent of its team: one neutral grey plus noise.
        grey = rng.uniform(185, 245)
        img[mask] = grey + rng.normal(0.0, 5.0, size=(int(mask.sum()), 1))
        label[mask] = 1 + team
        objects.append(
            dict(
                shape=shape,
                cx=float(cx),
                cy=float(cy),
                r=float(r),
                grey=float(grey),
                label=1 + team,
            )
        )
    meta = dict(team=team, side=side, objects=objects)
    return np.clip(np.round(img), 0, 255).astype(np.uint8), label, meta


def read_flag_team(img: np.ndarray, side: str, size: int, flag_frac: float) -> int:
    """Team whose colour is nearest to the mean colour of the flag band (the non-local cue)."""
    rows, cols = flag_region(side, size, flag_frac)
    mean = img[rows, cols].reshape(-1, 3).mean(0)
    dists = [np.linalg.norm(mean - np.asarray(c)) for c in TEAM_COLOURS]
    return int(np.argmin(dists))


def sample_rng(seed: int, split: str, index: int) -> np.random.Generator:
    """The generator of sample ``index`` of ``split``: independent of every other sample."""
    return np.random.default_rng([DESIGN_VERSION, seed, SPLITS.index(split), index])


def _write_png(path: str, array: np.ndarray) -> None:
    """Write a PNG with fixed compression (byte-identical for identical arrays)."""
    if array.ndim == 3:
        array = cv2.cvtColor(array, cv2.COLOR_RGB2BGR)
    if not cv2.imwrite(path, array, [cv2.IMWRITE_PNG_COMPRESSION, 3]):
        raise OSError(f"could not write {path}")


def is_generated(out_dir: str, cfg: Optional[ContextShapesConfig] = None) -> bool:
    """Whether ``out_dir`` holds a complete dataset of this generator version (and generated with
    exactly ``cfg``, if given)."""
    info_path = osp.join(out_dir, "context_shapes.json")
    if not osp.isfile(info_path):
        return False
    with open(info_path, encoding="utf-8") as f:
        info = json.load(f)
    if info.get("design_version") != DESIGN_VERSION:
        return False  # drawn by another version of the generator: different images
    if cfg is not None and info != cfg.to_json():
        return False
    for split in SPLITS:
        n = info[f"num_{split}"]
        for sub in ("img_dir", "ann_dir"):
            d = osp.join(out_dir, sub, split)
            if not osp.isdir(d) or len([p for p in os.listdir(d) if p.endswith(".png")]) != n:
                return False
    return True


def generate_context_shapes(
    out_dir: str, cfg: Optional[ContextShapesConfig] = None, progress: bool = True
) -> dict[str, Any]:
    """Write ``img_dir/{train,val}/NNNNNN.png`` (RGB), ``ann_dir/...`` (uint8 labels) and, last
    (so an interrupted run is not complete for :func:`is_generated`), ``context_shapes.json``;
    returns the options written there. Files of a larger earlier run are removed."""
    from tqdm import tqdm

    cfg = cfg or ContextShapesConfig()
    if cfg.min_objects < 1 or cfg.max_objects < cfg.min_objects:
        raise ValueError("need 1 <= min_objects <= max_objects")
    info_path = osp.join(out_dir, "context_shapes.json")
    if osp.exists(info_path):
        os.remove(info_path)
    jobs = [(s, i) for s in SPLITS for i in range(getattr(cfg, f"num_{s}"))]
    for split in SPLITS:
        for sub in ("img_dir", "ann_dir"):
            d = osp.join(out_dir, sub, split)
            os.makedirs(d, exist_ok=True)
            for p in os.listdir(d):  # stale files of a larger previous run
                if p.endswith(".png") and int(p[:-4]) >= getattr(cfg, f"num_{split}"):
                    os.remove(osp.join(d, p))
    for split, i in tqdm(jobs, desc="context shapes", unit="img", disable=not progress):
        img, label, _ = draw_sample(sample_rng(cfg.seed, split, i), cfg)
        name = f"{i:06d}.png"
        _write_png(osp.join(out_dir, "img_dir", split, name), img)
        _write_png(osp.join(out_dir, "ann_dir", split, name), label)
    info = cfg.to_json()
    with open(info_path, "w", encoding="utf-8") as f:
        json.dump(info, f, indent=2)
    return info


@DATASETS.register_module()
class ContextShapesDataset(BaseSegDataset):
    """The generated Context Shapes dataset: ``BaseSegDataset`` with ``.png`` images and label
    maps; label 0 (background) is a real class."""

    METAINFO = dict(classes=CLASSES, palette=PALETTE)

    def __init__(self, img_suffix: str = ".png", seg_map_suffix: str = ".png", **kwargs) -> None:
        kwargs.setdefault("reduce_zero_label", False)
        super().__init__(img_suffix=img_suffix, seg_map_suffix=seg_map_suffix, **kwargs)


def write_preview(out_dir: str, path: str, count: int) -> None:
    """A PNG montage: the first ``count`` training images above their label maps in colour."""
    palette = np.asarray(PALETTE, np.uint8)
    tops, bottoms = [], []
    for i in range(count):
        name = f"{i:06d}.png"
        img = cv2.imread(osp.join(out_dir, "img_dir", "train", name), cv2.IMREAD_COLOR)
        if img is None:
            break
        label = cv2.imread(osp.join(out_dir, "ann_dir", "train", name), cv2.IMREAD_UNCHANGED)
        gap = np.full((img.shape[0], 4, 3), 255, np.uint8)
        tops += [img, gap]
        bottoms += [np.ascontiguousarray(palette[label][:, :, ::-1]), gap]
    top, bottom = np.concatenate(tops[:-1], 1), np.concatenate(bottoms[:-1], 1)
    sep = np.full((4, top.shape[1], 3), 255, np.uint8)
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    cv2.imwrite(path, np.concatenate([top, sep, bottom], 0))
