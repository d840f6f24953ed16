"""Context Rooms: a generated dataset where each player's class is the flag of its own room.

Three parallel rooms, each with a floor of its own hue and a flag of its own team colour near
one wall (the three teams in a random order); every player, tinted with its room's hue, belongs
to the team of its room's flag. A player's pixels say which room it is in, never which team;
its flag is far away; every image holds all three flag colours. So one global fact cannot
decide the class: the player must be related to the flag that shares its room's hue. It does
not separate heads: given 2000 iterations the local FCN solves it as well as the context heads
(docs/demo.md). A lab task of the demo head comparison (:mod:`~tools.lab.analysis.head_comparison`,
``python tools/compare_demo_heads.py --task rooms``); configs load it through
``custom_imports`` (tools/lab/configs/context_rooms.py). docs/demo.md.
"""

from __future__ import annotations

import colorsys
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import cv2
import numpy as np
from mmseg.registry import DATASETS

from hamseg.datasets.context_shapes import (
    CLASSES,
    PALETTE,
    SHAPES,
    SIDES,
    TEAM_COLOURS,
    ContextShapesDataset,
    shape_mask,
)
from hamseg.datasets.generated import SPLITS, is_complete, write_dataset

__all__ = [
    "CLASSES",
    "PALETTE",
    "TEAM_COLOURS",
    "ContextRoomsConfig",
    "ContextRoomsDataset",
    "draw_sample",
    "generate_context_rooms",
    "is_generated",
    "sample_rng",
]
#: Version of the design; bumped whenever the same options would draw different images.
DESIGN_VERSION = 3
#: Written into the dataset folder with the options.
INFO_NAME = "context_rooms.json"


@dataclass
class ContextRoomsConfig:
    """Generator options (sizes in pixels or fractions of ``size``): ``players`` per room (a
    range); the flag's depth ``flag_frac``, its ``flag_margin`` from the wall and the room's sides
    and the width of its stripes in the room's player colour (``stripe``, px); the players'
    radius ``object_frac`` and how much of its room's floor colour tints a player
    (``player_tint``, 0: neutral grey); floors drawn in HSV with saturation ``floor_saturation``
    and value ``floor_value`` (ranges), their hues at least ``min_hue_gap`` (a fraction of the
    circle) and their RGB colours at least ``min_floor_gap`` apart."""

    size: int = 128
    num_train: int = 400
    num_val: int = 100
    seed: int = 0
    players: tuple[int, int] = field(default=(1, 3))
    flag_frac: float = 0.125
    flag_margin: float = 0.03
    stripe: int = 3
    object_frac: tuple[float, float] = field(default=(0.06, 0.1))
    player_tint: float = 0.5
    min_floor_gap: float = 40.0
    floor_saturation: tuple[float, float] = field(default=(0.45, 0.7))
    floor_value: tuple[float, float] = field(default=(0.35, 0.55))
    min_hue_gap: float = 1 / 6

    def to_json(self) -> dict[str, Any]:
        """The options plus the design version, as written to ``context_rooms.json``."""
        return {
            **asdict(self),
            "players": list(self.players),
            "object_frac": list(self.object_frac),
            "floor_saturation": list(self.floor_saturation),
            "floor_value": list(self.floor_value),
            "design_version": DESIGN_VERSION,
        }


def room_bounds(size: int, rooms: int = len(TEAM_COLOURS)) -> list[tuple[int, int]]:
    """``[start, stop)`` of each room along the flag's wall (equal parts of the side)."""
    edges = np.round(np.linspace(0, size, rooms + 1)).astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def room_region(side: str, size: int, room: tuple[int, int]) -> tuple[slice, slice]:
    """(rows, cols) slices of one room: a strip across the image, perpendicular to the wall."""
    across = slice(*room)
    return (slice(0, size), across) if side in ("top", "bottom") else (across, slice(0, size))


def flag_region(
    side: str, size: int, cfg: ContextRoomsConfig, room: tuple[int, int]
) -> tuple[slice, slice]:
    """(rows, cols) slices of one room's flag: a band along the wall ``side``, ``flag_margin``
    away from the wall and from the room's sides (floor all around it)."""
    w = max(2, int(round(size * cfg.flag_frac)))
    m = int(round(size * cfg.flag_margin))
    band = slice(m, m + w) if side in ("left", "top") else slice(size - m - w, size - m)
    across = slice(room[0] + m, room[1] - m)
    return (band, across) if side in ("top", "bottom") else (across, band)


def _floor_colours(rng: np.random.Generator, count: int, cfg: ContextRoomsConfig) -> np.ndarray:
    """``count`` RGB floor colours: hues pairwise at least ``cfg.min_hue_gap`` apart on the
    circle, RGB colours at least ``cfg.min_floor_gap`` apart."""
    for _ in range(1000):
        hues = rng.uniform(0.0, 1.0, size=count)
        sat = rng.uniform(*cfg.floor_saturation, size=count)
        val = rng.uniform(*cfg.floor_value, size=count)
        rgb = 255.0 * np.array([colorsys.hsv_to_rgb(*c) for c in zip(hues, sat, val)])
        pairs = np.triu_indices(count, 1)
        turn = np.abs(hues[:, None] - hues[None])[pairs]
        gaps = np.linalg.norm(rgb[:, None] - rgb[None], axis=-1)[pairs]
        if np.minimum(turn, 1 - turn).min() >= cfg.min_hue_gap and gaps.min() >= cfg.min_floor_gap:
            return rgb
    raise ValueError("no floor colours found as far apart as min_hue_gap and min_floor_gap ask")


def draw_sample(
    rng: np.random.Generator, cfg: ContextRoomsConfig, teams: Optional[list[int]] = None
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """``(img, label, meta)``: RGB uint8 (size, size, 3), uint8 labels (``1 + teams[k]`` on the
    players of room ``k``, ``4 + teams[k]`` on its flag) and ``teams``, ``side``, ``floors`` and
    the ``objects`` drawn. Forced ``teams`` (a permutation) consume the same random numbers: only
    the flags' colours and the players' classes change (the cues decide)."""
    size = cfg.size
    k = len(TEAM_COLOURS)
    drawn = [int(t) for t in rng.permutation(k)]
    teams = drawn if teams is None else [int(t) for t in teams]
    side = SIDES[int(rng.integers(len(SIDES)))]
    floors = _floor_colours(rng, k, cfg)
    low = rng.normal(0.0, 8.0, size=(6, 6, 3)).astype(np.float32)
    img = cv2.resize(low, (size, size), interpolation=cv2.INTER_CUBIC).astype(np.float64)
    img += rng.normal(0.0, 5.0, size=(size, size, 3))
    label = np.zeros((size, size), np.uint8)
    rooms = room_bounds(size, k)
    for room, floor in zip(rooms, floors):
        img[room_region(side, size, room)] += floor
    h = size // 2 + int(round(size * cfg.flag_margin))  # players: the half away from the flags
    rmin = cfg.object_frac[0] * size
    rmax = cfg.object_frac[1] * size
    objects: list[dict[str, Any]] = []
    for r_i, (room, team, floor) in enumerate(zip(rooms, teams, floors)):
        rows, cols = flag_region(side, size, cfg, room)
        flag_rgb = np.asarray(TEAM_COLOURS[team], np.float64) + rng.uniform(-15, 15, size=3)
        band = (rows.stop - rows.start, cols.stop - cols.start, 3)
        img[rows, cols] = flag_rgb + rng.normal(0.0, 6.0, size=band)
        # stripes across the flag in the room's player colour: the key it shares with them
        key = 215.0 + cfg.player_tint * (floor * 230.0 / max(floor.max(), 1.0) - 215.0)
        stripes = np.zeros((size, size), bool)
        stripes[rows, cols] = True
        along_wall = (
            np.arange(size)[None, :] if side in ("top", "bottom") else np.arange(size)[:, None]
        )
        stripes &= (along_wall // cfg.stripe) % 2 == 1
        img[stripes] = key
        label[rows, cols] = 1 + k + team
        # the room's far half, in image coordinates: x along columns, y along rows
        along = (h, size) if side in ("left", "top") else (0, size - h)
        xr, yr = (room, along) if side in ("top", "bottom") else (along, room)
        n = int(rng.integers(cfg.players[0], cfg.players[1] + 1))
        occupied = np.zeros((size, size), bool)
        for _ in range(n * 30):  # rejection sampling of non-touching players inside the room
            if sum(o["room"] == r_i for o in objects) == n:
                break
            r = rng.uniform(rmin, rmax)
            cx = rng.uniform(xr[0] + r + 2, xr[1] - r - 2)
            cy = rng.uniform(yr[0] + r + 2, yr[1] - r - 2)
            shape = SHAPES[int(rng.integers(len(SHAPES)))]
            mask = shape_mask(shape, cx, cy, r, size)
            grown = cv2.dilate(mask.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
            if (grown & occupied).any():
                continue
            occupied |= mask
            grey = rng.uniform(185, 245)  # the look depends on the room, never on the team
            tint = cfg.player_tint * (floor * 230.0 / max(floor.max(), 1.0) - grey)
            img[mask] = grey + tint + rng.normal(0.0, 5.0, size=(int(mask.sum()), 1))
            label[mask] = 1 + team
            objects.append(dict(shape=shape, cx=cx, cy=cy, r=r, grey=grey, room=r_i))
    meta = dict(teams=teams, side=side, floors=floors.tolist(), objects=objects)
    return np.clip(np.round(img), 0, 255).astype(np.uint8), label, meta


def sample_rng(seed: int, split: str, index: int) -> np.random.Generator:
    """The generator of sample ``index`` of ``split``: independent of every other sample."""
    return np.random.default_rng([DESIGN_VERSION, 2, seed, SPLITS.index(split), index])


def is_generated(out_dir: str, cfg: Optional[ContextRoomsConfig] = None) -> bool:
    """Whether ``out_dir`` holds a complete dataset of this design version (and of ``cfg``)."""
    return is_complete(out_dir, INFO_NAME, DESIGN_VERSION, cfg.to_json() if cfg else None)


def generate_context_rooms(
    out_dir: str, cfg: Optional[ContextRoomsConfig] = None, progress: bool = True
) -> dict[str, Any]:
    """Write the dataset of ``cfg`` into ``out_dir`` (:func:`hamseg.datasets.generated.
    write_dataset`, info file ``context_rooms.json``); returns the options written there."""
    cfg = cfg or ContextRoomsConfig()
    if not 1 <= cfg.players[0] <= cfg.players[1]:
        raise ValueError("players: need 1 <= low <= high")

    def draw(split: str, index: int) -> tuple[np.ndarray, np.ndarray]:
        return draw_sample(sample_rng(cfg.seed, split, index), cfg)[:2]

    return write_dataset(out_dir, INFO_NAME, cfg.to_json(), draw, progress)


@DATASETS.register_module()
class ContextRoomsDataset(ContextShapesDataset):
    """The generated rooms: ``.png`` images and label maps, Context Shapes' seven classes."""
