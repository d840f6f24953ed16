"""The lab's generated tasks: Context Rooms and the screen's candidates
(projects/context_lab/README.md, "Tasks and the screen").

Every task keeps Context Shapes' seven classes (background, three teams on the players, three
flags) and its folder layout, so every demo head config trains on it unchanged. In each, a
player's pixels never say its team: the answer is elsewhere in the image. ``rooms``: three
rooms, a player takes the flag of the room whose floor hue it shares. The screen's candidates:
``keyed`` (four flags, each with a key hue; a player is filled with its flag's key hue),
``column`` (a player takes the flag of its own column), ``nearer`` (a player takes the nearer of
two flags), ``count`` (the number of flags is every player's team), ``pairs`` (a player takes
the flag drawn in its own shape).
"""

from __future__ import annotations

import colorsys
from typing import Any, Callable, Optional

import cv2
import numpy as np

from hamseg.datasets.context_shapes import (
    SHAPES,
    SIDES,
    SPLITS,
    TEAM_COLOURS,
    is_complete,
    write_dataset,
)
from hamseg.datasets.context_shapes import shape_mask as _shape_mask

K = len(TEAM_COLOURS)
#: Version of the designs; bumped whenever the same options would draw different images.
DESIGN_VERSION = 3
Draw = Callable[..., tuple[np.ndarray, np.ndarray, dict[str, Any]]]


def _canvas(rng: np.random.Generator, size: int, base: float = 0.0) -> np.ndarray:
    """Low-frequency blotches plus pixel noise around ``base``, float (size, size, 3)."""
    low = rng.normal(0.0, 8.0, size=(6, 6, 3)).astype(np.float32)
    img = cv2.resize(low, (size, size), interpolation=cv2.INTER_CUBIC).astype(np.float64)
    return img + base + rng.normal(0.0, 5.0, size=(size, size, 3))


def _finish(img: np.ndarray) -> np.ndarray:
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def _flag(rng, img, label, region, team: int) -> None:  # noqa: ANN001
    """Paint ``team``'s flag colour (jittered, noisy) into ``region`` and label it."""
    rgb = np.asarray(TEAM_COLOURS[team], np.float64) + rng.uniform(-15, 15, size=3)
    img[region] = rgb + rng.normal(0.0, 6.0, size=img[region].shape)
    label[region] = 1 + K + team


def _players(rng, size, box, n, occupied, shapes=SHAPES):  # noqa: ANN001
    """Up to ``n`` non-touching player masks inside ``box`` ((x0, x1), (y0, y1)) by rejection
    sampling; yields (mask, shape, centre)."""
    (x0, x1), (y0, y1) = box
    placed = 0
    for _ in range(n * 30):
        if placed == n:
            return
        r = rng.uniform(0.06, 0.1) * size
        cx, cy = rng.uniform(x0 + r + 2, x1 - r - 2), rng.uniform(y0 + r + 2, y1 - r - 2)
        shape = shapes[int(rng.integers(len(shapes)))]
        mask = _shape_mask(shape, cx, cy, r, size)
        grown = cv2.dilate(mask.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
        if not (grown & occupied).any():
            occupied |= mask
            placed += 1
            yield mask, shape, (cx, cy)


def _grey(rng, img, mask, colour: Optional[np.ndarray] = None) -> None:  # noqa: ANN001
    """A player: neutral grey (or ``colour``) plus noise, the same whatever its team."""
    fill = rng.uniform(185, 245) if colour is None else colour
    img[mask] = fill + rng.normal(0.0, 5.0, size=(int(mask.sum()), 1))


# Context Rooms (flag depth, its margin from the walls, stripe width: fractions of the size / px)
FLAG, MARGIN, STRIPE, TINT, MIN_FLOOR_GAP = 0.125, 0.03, 3, 0.5, 40.0


def room_bounds(size: int) -> list[tuple[int, int]]:
    """``[start, stop)`` of each room along the flags' wall."""
    edges = np.round(np.linspace(0, size, K + 1)).astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def room_region(side: str, size: int, room: tuple[int, int]) -> tuple[slice, slice]:
    """(rows, cols) of one room: a strip across the image, perpendicular to the wall ``side``."""
    across = slice(*room)
    return (slice(0, size), across) if side in ("top", "bottom") else (across, slice(0, size))


def flag_region(side: str, size: int, room: tuple[int, int]) -> tuple[slice, slice]:
    """(rows, cols) of a room's flag: a band along the wall, MARGIN from it and the room's sides."""
    w, m = max(2, round(size * FLAG)), round(size * MARGIN)
    band = slice(m, m + w) if side in ("left", "top") else slice(size - m - w, size - m)
    across = slice(room[0] + m, room[1] - m)
    return (band, across) if side in ("top", "bottom") else (across, band)


def _floors(rng: np.random.Generator) -> np.ndarray:
    """K RGB floors, hues >= 1/6 of the circle apart, colours >= MIN_FLOOR_GAP apart."""
    for _ in range(1000):
        hsv = zip(rng.uniform(0, 1, K), rng.uniform(0.45, 0.7, K), rng.uniform(0.35, 0.55, K))
        hsv = list(hsv)
        rgb = 255.0 * np.array([colorsys.hsv_to_rgb(*c) for c in hsv])
        pairs = np.triu_indices(K, 1)
        turn = np.abs(np.array([c[0] for c in hsv])[:, None] - [c[0] for c in hsv])[pairs]
        gaps = np.linalg.norm(rgb[:, None] - rgb[None], axis=-1)[pairs]
        if np.minimum(turn, 1 - turn).min() >= 1 / 6 and gaps.min() >= MIN_FLOOR_GAP:
            return rgb
    raise ValueError("no floor colours found far enough apart")


def draw_rooms(rng: np.random.Generator, size: int, teams: Optional[list[int]] = None) -> Any:
    """Context Rooms: ``(img, label, meta)``. Forced ``teams`` (a permutation) consume the same
    random numbers: only the flags' colours and the players' classes change."""
    drawn = [int(t) for t in rng.permutation(K)]
    teams = drawn if teams is None else [int(t) for t in teams]
    side = SIDES[int(rng.integers(len(SIDES)))]
    floors = _floors(rng)
    img, label = _canvas(rng, size), np.zeros((size, size), np.uint8)
    rooms = room_bounds(size)
    for room, floor in zip(rooms, floors):
        img[room_region(side, size, room)] += floor
    h = size // 2 + round(size * MARGIN)  # players: the half away from the flags
    along_wall = np.arange(size)[None, :] if side in ("top", "bottom") else np.arange(size)[:, None]
    occupied = np.zeros((size, size), bool)
    for room, team, floor in zip(rooms, teams, floors):
        region = flag_region(side, size, room)
        _flag(rng, img, label, region, team)
        tint = floor * 230.0 / max(floor.max(), 1.0)  # the room's key, on flag stripes and players
        stripes = np.zeros((size, size), bool)
        stripes[region] = True
        img[stripes & ((along_wall // STRIPE) % 2 == 1)] = 215.0 + TINT * (tint - 215.0)
        along = (h, size) if side in ("left", "top") else (0, size - h)
        box = (room, along) if side in ("top", "bottom") else (along, room)
        n = int(rng.integers(1, 4))
        for mask, *_ in _players(rng, size, box, n, occupied):
            grey = rng.uniform(185, 245)
            img[mask] = grey + TINT * (tint - grey) + rng.normal(0, 5.0, (int(mask.sum()), 1))
            label[mask] = 1 + team
    return _finish(img), label, dict(teams=teams, side=side, floors=floors.tolist())


def _hue(h: float) -> np.ndarray:
    return 255.0 * np.array(colorsys.hsv_to_rgb(h % 1.0, 0.6, 0.85))


def draw_keyed(rng: np.random.Generator, size: int) -> Any:
    """Four flags along the top, each a team colour striped with its own key hue; each player
    in the bottom half is filled with one flag's key hue and takes that flag's team."""
    img, label = _canvas(rng, size, 100.0), np.zeros((size, size), np.uint8)
    teams, hues = rng.integers(0, K, 4), rng.uniform() + np.arange(4) / 4
    w, slots = max(2, round(size * FLAG)), np.linspace(0, size, 5).round().astype(int)
    for i in range(4):
        region = (slice(2, 2 + w), slice(slots[i] + 2, slots[i + 1] - 2))
        _flag(rng, img, label, region, int(teams[i]))
        img[region[0], region[1]][:, 1::4] = _hue(hues[i])  # stripes of the key hue
    occupied = np.zeros((size, size), bool)
    for mask, *_ in _players(rng, size, ((0, size), (size // 2, size)), 4, occupied):
        i = int(rng.integers(4))
        _grey(rng, img, mask, _hue(hues[i]))
        label[mask] = 1 + teams[i]
    return _finish(img), label, dict(teams=teams.tolist())


def draw_column(rng: np.random.Generator, size: int) -> Any:
    """Context Rooms without floors: a player takes the flag at the end of its own column."""
    teams, side = rng.permutation(K), SIDES[int(rng.integers(len(SIDES)))]
    img, label = _canvas(rng, size, 100.0), np.zeros((size, size), np.uint8)
    h, occupied = size // 2, np.zeros((size, size), bool)
    for room, team in zip(room_bounds(size), teams):
        _flag(rng, img, label, flag_region(side, size, room), int(team))
        along = (h, size) if side in ("left", "top") else (0, size - h)
        box = (room, along) if side in ("top", "bottom") else (along, room)
        for mask, *_ in _players(rng, size, box, int(rng.integers(1, 3)), occupied):
            _grey(rng, img, mask)
            label[mask] = 1 + team
    return _finish(img), label, dict(teams=teams.tolist(), side=side)


def draw_nearer(rng: np.random.Generator, size: int) -> Any:
    """Two flags of different teams at random places; a player takes the nearer one (their
    distances differ by >= size / 8, both >= size / 4)."""
    img, label = _canvas(rng, size, 100.0), np.zeros((size, size), np.uint8)
    teams, w = rng.choice(K, 2, replace=False), max(2, round(size * FLAG))
    centres = rng.uniform(w, size - w, (2, 2))
    for (cx, cy), team in zip(centres, teams):
        x, y = int(cx - w / 2), int(cy - w / 2)
        _flag(rng, img, label, (slice(y, y + w), slice(x, x + w)), int(team))
    occupied = label > 0
    for mask, _, c in _players(rng, size, ((0, size), (0, size)), 12, occupied.copy()):
        d = np.linalg.norm(centres - c, axis=1)
        if d.min() < size / 4 or abs(d[0] - d[1]) < size / 8:
            continue
        _grey(rng, img, mask)
        label[mask] = 1 + teams[int(d.argmin())]
    return _finish(img), label, dict(teams=teams.tolist())


def draw_count(rng: np.random.Generator, size: int) -> Any:
    """1-3 flags of random colours along one side; every player's team is their number - 1."""
    n, side = int(rng.integers(1, K + 1)), SIDES[int(rng.integers(len(SIDES)))]
    img, label = _canvas(rng, size, 100.0), np.zeros((size, size), np.uint8)
    rooms = room_bounds(size)
    for r in rng.choice(K, n, replace=False):
        _flag(rng, img, label, flag_region(side, size, rooms[r]), int(rng.integers(K)))
    along = (size // 2, size) if side in ("left", "top") else (0, size - size // 2)
    box = ((0, size), along) if side in ("top", "bottom") else (along, (0, size))
    for mask, *_ in _players(rng, size, box, 3, np.zeros((size, size), bool)):
        _grey(rng, img, mask)
        label[mask] = n  # 1 + (n - 1)
    return _finish(img), label, dict(flags=n)


def draw_pairs(rng: np.random.Generator, size: int) -> Any:
    """Three flags drawn as shapes (circle, square, triangle) in the top half, one per team; a
    grey player in the bottom half takes the team of the flag of its shape."""
    shapes, teams = ("circle", "square", "triangle"), rng.permutation(K)
    img, label = _canvas(rng, size, 100.0), np.zeros((size, size), np.uint8)
    occupied, top = np.zeros((size, size), bool), ((0, size), (0, size // 2 - size // 8))
    for shape, team in zip(shapes, teams):
        for mask, *_ in _players(rng, size, top, 1, occupied, (shape,)):
            _flag(rng, img, label, mask, int(team))
    drawn = tuple(s for s, t in zip(shapes, teams) if (label == 1 + K + t).any()) or shapes
    box = ((0, size), (size // 2 + size // 8, size))
    for mask, shape, _ in _players(rng, size, box, 4, occupied, drawn):
        _grey(rng, img, mask)
        label[mask] = 1 + teams[shapes.index(shape)]
    return _finish(img), label, dict(teams=teams.tolist())


#: Task name -> draw(rng, size); ``rooms`` first, then the screen's candidates.
TASKS: dict[str, Draw] = dict(
    rooms=draw_rooms,
    keyed=draw_keyed,
    column=draw_column,
    nearer=draw_nearer,
    count=draw_count,
    pairs=draw_pairs,
)


def sample_rng(task: str, seed: int, split: str, index: int) -> np.random.Generator:
    """The generator of one sample, independent of every other (rooms: as before the move)."""
    key = 2 if task == "rooms" else 10 + list(TASKS).index(task)
    return np.random.default_rng([DESIGN_VERSION, key, seed, SPLITS.index(split), index])


def generate(out_dir: str, task: str = "rooms", progress: bool = True, **opts: int) -> dict:
    """Write ``task`` into ``out_dir`` in mmseg's layout unless it is there with these options
    (``size`` 128, ``num_train`` 400, ``num_val`` 100, ``seed`` 0 by default)."""
    info = dict(
        task=task, size=128, num_train=400, num_val=100, seed=0, design_version=DESIGN_VERSION
    )
    info.update(opts)
    if is_complete(out_dir, "lab_task.json", DESIGN_VERSION, info):
        return info

    def draw(split: str, index: int) -> tuple[np.ndarray, np.ndarray]:
        return TASKS[task](sample_rng(task, info["seed"], split, index), info["size"])[:2]

    return write_dataset(out_dir, "lab_task.json", info, draw, progress)


def main(argv: Optional[list[str]] = None) -> None:
    """``python -m projects.context_lab.context_lab.tasks rooms --out-dir data/context_rooms``"""
    import argparse

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("task", choices=list(TASKS))
    p.add_argument("--out-dir", required=True)
    for name, default in (("size", 128), ("num-train", 400), ("num-val", 100), ("seed", 0)):
        p.add_argument(f"--{name}", type=int, default=default)
    args = vars(p.parse_args(argv))
    print(generate(args.pop("out_dir"), args.pop("task"), **args))


if __name__ == "__main__":
    main()
