"""Context Rooms (tools.lab.analysis.context_rooms, a lab task of the head comparison): the
generator's determinism, the label design (each player's class is the flag of its own room, and
nothing else), mmseg loading (in a fresh process through the configs' ``custom_imports``), CLI."""

from __future__ import annotations

import hashlib
import os
import os.path as osp
import subprocess
import sys

import numpy as np
import pytest

import hamseg  # noqa: F401  (must precede mmseg imports)
from tests.conftest import REPO
from tools.lab.analysis import head_comparison as hc
from tools.lab.analysis.context_rooms import (
    CLASSES,
    TEAM_COLOURS,
    ContextRoomsConfig,
    draw_sample,
    flag_region,
    generate_context_rooms,
    is_generated,
    room_bounds,
    room_region,
    sample_rng,
)

K = len(TEAM_COLOURS)
CFG = ContextRoomsConfig()
TINY = ContextRoomsConfig(size=96, num_train=4, num_val=3, seed=5)


def read_team(img: np.ndarray, region: tuple[slice, slice]) -> int:
    """The team whose colour most of a flag's pixels are nearest to (its stripes in the room's
    player colour are the rest)."""
    px = img[region].reshape(-1, 1, 3).astype(float)
    dist = np.linalg.norm(px - np.asarray(TEAM_COLOURS, float)[None], axis=2)
    return int(np.bincount(dist.argmin(1)[dist.min(1) < 60], minlength=K).argmax())


def player_rooms(label: np.ndarray, side: str, size: int) -> list[tuple[int, np.ndarray]]:
    """(room, mask) of every room's player pixels."""
    players = (label >= 1) & (label <= K)
    out = []
    for r, room in enumerate(room_bounds(size)):
        mask = np.zeros_like(players)
        mask[room_region(side, size, room)] = True
        out.append((r, players & mask))
    return out


def _digests(root: str) -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            with open(osp.join(dirpath, f), "rb") as fh:
                out[osp.relpath(osp.join(dirpath, f), root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a, b, c = (str(tmp_path / n) for n in "abc")
    generate_context_rooms(a, TINY, progress=False)
    generate_context_rooms(b, TINY, progress=False)
    generate_context_rooms(c, ContextRoomsConfig(**{**TINY.__dict__, "seed": 6}), False)
    da, db, dc = _digests(a), _digests(b), _digests(c)
    assert len(da) == 2 * (4 + 3) + 1 and da == db  # images, labels, context_rooms.json
    assert all(da[k] != dc[k] for k in da if k.startswith("img_dir"))
    assert is_generated(a, TINY) and is_generated(a) and not is_generated(a, CFG)
    os.remove(osp.join(a, "ann_dir", "val", "000002.png"))
    assert not is_generated(a, TINY)


@pytest.mark.parametrize("index", range(30))
def test_each_player_takes_the_flag_of_its_own_room(index):
    """Every player lies inside one room, far from the wall with the flags, and its class is
    1 + the team read from the pixels of that room's flag; every image has all three flags."""
    img, label, meta = draw_sample(sample_rng(0, "train", index), CFG)
    side, rooms = meta["side"], room_bounds(CFG.size)
    teams = [read_team(img, flag_region(side, CFG.size, CFG, room)) for room in rooms]
    assert teams == meta["teams"] and sorted(teams) == list(range(K))
    flags = label >= 1 + K
    assert set(np.unique(label[flags])) == {1 + K + t for t in range(K)}
    assert sum(mask.sum() for _, mask in player_rooms(label, side, CFG.size)) == (
        ((label >= 1) & (label <= K)).sum()
    )
    for r, mask in player_rooms(label, side, CFG.size):
        assert mask.any(), f"room {r} has no player"
        assert set(np.unique(label[mask])) == {1 + teams[r]}
        ys, xs = np.nonzero(mask)
        fy, fx = np.nonzero(flags)
        across = (xs[:, None] - fx[None]) if side in ("left", "right") else (ys[:, None] - fy)
        assert np.abs(across).min() >= CFG.size * 3 // 8  # 48 px at 128: 6 cells at OS8


@pytest.mark.parametrize("index", range(8))
def test_permuting_the_flags_changes_only_flags_and_classes(index):
    """Same random state, another order of the teams: pixels differ only inside the flags, the
    players' pixels and masks stay, and each room's players switch to its new flag's team."""
    outs = [
        draw_sample(sample_rng(1, "val", index), CFG, teams=list(p))
        for p in ((0, 1, 2), (2, 0, 1), (1, 2, 0), (0, 2, 1))
    ]
    side = outs[0][2]["side"]
    flags = np.zeros((CFG.size, CFG.size), bool)
    for room in room_bounds(CFG.size):
        flags[flag_region(side, CFG.size, CFG, room)] = True
    base_img, base_label, _ = outs[0]
    for img, label, meta in outs:
        assert np.array_equal(img[~flags], base_img[~flags])
        assert np.array_equal(label == 0, base_label == 0)
        for r, mask in player_rooms(label, side, CFG.size):
            assert set(np.unique(label[mask])) == {1 + meta["teams"][r]}


def test_one_global_fact_cannot_decide_a_player():
    """The set of flag colours is the same in every image and each room's team is equally often
    each colour; a player's colour is set by its room's floor (the key it shares with its
    flag), and players of each team look alike on average: what decides a player is which flag
    shares its room."""
    counts = np.zeros((K, K), int)  # room x team
    looks: dict[int, list[float]] = {t: [] for t in range(K)}
    for i in range(120):
        img, label, meta = draw_sample(sample_rng(2, "train", i), CFG)
        floors = np.asarray(meta["floors"])
        for r, t in enumerate(meta["teams"]):
            counts[r, t] += 1
        for r, mask in player_rooms(label, meta["side"], CFG.size):
            px = img[mask].astype(float).mean(0)  # its hue is its room floor's hue
            assert np.corrcoef(px, floors[r])[0, 1] > 0.9
            looks[meta["teams"][r]].append(px.mean())
    assert counts.min() >= 25  # 40 expected per cell
    means = [np.mean(v) for v in looks.values()]
    assert max(means) - min(means) < 6.0


@pytest.mark.parametrize("index", range(10))
def test_rooms_have_distinct_floors_around_their_players(index):
    """Half of each flag is striped in its room's player colour (the key it shares with them);
    the floor next to a player is its room's floor, at least ``min_floor_gap`` from the other
    rooms' floors."""
    import cv2

    img, label, meta = draw_sample(sample_rng(3, "train", index), CFG)
    floors = np.asarray(meta["floors"])
    gaps = np.linalg.norm(floors[:, None] - floors[None], axis=-1)
    assert gaps[np.triu_indices(K, 1)].min() >= CFG.min_floor_gap
    for r, room in enumerate(room_bounds(CFG.size)):  # the flag's stripes: the players' colour
        bright = floors[r] * 230.0 / floors[r].max()
        key = np.round(215.0 + CFG.player_tint * (bright - 215.0))
        px = img[flag_region(meta["side"], CFG.size, CFG, room)].reshape(-1, 3)
        assert (np.abs(px - key).max(1) == 0).mean() == pytest.approx(0.5, abs=0.1)
    for r, mask in player_rooms(label, meta["side"], CFG.size):
        ring = cv2.dilate(mask.astype(np.uint8), np.ones((7, 7), np.uint8)).astype(bool)
        ring &= label == 0
        nearest = np.argmin(np.linalg.norm(img[ring].mean(0) - floors, axis=1))
        assert nearest == r


def test_dataset_class_loads_through_mmseg_pipeline(tmp_path):
    from mmengine.registry import init_default_scope
    from mmseg.registry import DATASETS

    init_default_scope("mmseg")
    root = str(tmp_path / "rooms")
    generate_context_rooms(root, TINY, progress=False)
    ds = DATASETS.build(
        dict(
            type="ContextRoomsDataset",
            data_root=root,
            data_prefix=dict(img_path="img_dir/val", seg_map_path="ann_dir/val"),
            pipeline=[
                dict(type="LoadImageFromFile"),
                dict(type="LoadAnnotations"),
                dict(type="PackSegInputs"),
            ],
        )
    )
    assert len(ds) == 3 and ds.metainfo["classes"] == CLASSES
    sample = ds[1]
    assert tuple(sample["inputs"].shape) == (3, 96, 96)
    assert set(sample["data_samples"].gt_sem_seg.data.unique().tolist()) == set(range(7))


def test_configs_import_the_dataset_class_in_a_fresh_process(tmp_path):
    """Outside hamseg, the dataset class is registered where a config names it: the rooms
    dataset config and each comparison run's config file (what tools/run_demo.py loads in its
    own process, from the repository root) import it through ``custom_imports``."""
    root = str(tmp_path / "rooms")
    generate_context_rooms(root, TINY, progress=False)
    run = hc.run_config(hc.HEADS["fcn"], hc.TASKS["rooms"], "paper", data_root=root)
    run_path = tmp_path / "run.py"
    run_path.write_text(run.pretty_text)
    data = osp.join(REPO, "tools", "lab", "configs", "context_rooms.py")
    code = (
        "import sys, hamseg\n"
        "from mmengine.config import Config\n"
        "from mmengine.registry import init_default_scope\n"
        "from mmseg.registry import DATASETS\n"
        "init_default_scope('mmseg')\n"
        "for path in sys.argv[1:]:\n"
        "    dataset = Config.fromfile(path).val_dataloader.dataset\n"
        f"    dataset.data_root = {root!r}\n"
        "    built = DATASETS.build(dataset)\n"
        "    print(type(built).__name__, len(built))\n"
    )
    cmd = [sys.executable, "-c", code, data, str(run_path)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["ContextRoomsDataset", "3"] * 2


def test_cli_writes_dataset_and_preview(tmp_path):
    import cv2

    out, preview = str(tmp_path / "cli"), str(tmp_path / "preview.png")
    cmd = [sys.executable, "tools/dataset_converters/generate_context_rooms.py", "--out-dir", out]
    cmd += ["--size", "64", "--num-train", "3", "--num-val", "2", "--seed", "9", "--no-progress"]
    proc = subprocess.run(
        cmd + ["--preview", preview], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert is_generated(out, ContextRoomsConfig(size=64, num_train=3, num_val=2, seed=9))
    assert cv2.imread(preview).shape == (2 * 64 + 4, 3 * 64 + 2 * 4, 3)
