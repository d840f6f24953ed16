"""The lab's generated tasks: determinism and reuse, Context Rooms' design (a player's class is
the flag of its own room and nothing else), every candidate's labels, loading through the lab's
data config in a fresh process (``custom_imports``), the generator's command line."""

import os
import os.path as osp
import subprocess
import sys

import numpy as np
import pytest

from projects.context_lab.context_lab import tasks as T

REPO = osp.dirname(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))


def team_of(img, region):
    """The team whose colour most of a flag's pixels are nearest to (its stripes aside)."""
    px = img[region].reshape(-1, 1, 3).astype(float)
    dist = np.linalg.norm(px - np.asarray(T.TEAM_COLOURS, float)[None], axis=2)
    return int(np.bincount(dist.argmin(1)[dist.min(1) < 60], minlength=T.K).argmax())


def players_by_room(label, side, size):
    players = (label >= 1) & (label <= T.K)
    for room in T.room_bounds(size):
        mask = np.zeros_like(players)
        mask[T.room_region(side, size, room)] = True
        yield players & mask


@pytest.mark.parametrize("index", range(6))
def test_each_player_takes_the_flag_of_its_own_room(index):
    img, label, meta = T.draw_rooms(T.sample_rng("rooms", 0, "train", index), 128)
    rooms = T.room_bounds(128)
    teams = [team_of(img, T.flag_region(meta["side"], 128, room)) for room in rooms]
    assert teams == meta["teams"] and sorted(teams) == [0, 1, 2]
    for r, mask in enumerate(players_by_room(label, meta["side"], 128)):
        assert mask.any() and set(np.unique(label[mask])) == {1 + teams[r]}


@pytest.mark.parametrize("index", range(4))
def test_permuting_the_flags_changes_only_flags_and_classes(index):
    outs = [
        T.draw_rooms(T.sample_rng("rooms", 1, "val", index), 96, list(p))
        for p in ((0, 1, 2), (2, 0, 1), (1, 2, 0))
    ]
    side = outs[0][2]["side"]
    flags = np.zeros((96, 96), bool)
    for room in T.room_bounds(96):
        flags[T.flag_region(side, 96, room)] = True
    for img, label, meta in outs:
        assert np.array_equal(img[~flags], outs[0][0][~flags])
        assert np.array_equal(label == 0, outs[0][1] == 0)
        for r, mask in enumerate(players_by_room(label, side, 96)):
            assert set(np.unique(label[mask])) == {1 + meta["teams"][r]}


@pytest.mark.parametrize("task", list(T.TASKS))
def test_every_task_labels_players_with_teams_and_flags_with_colours(task):
    seen = set()
    for i in range(8):
        img, label, _ = T.TASKS[task](T.sample_rng(task, 0, "train", i), 96)
        assert img.shape == (96, 96, 3) and img.dtype == np.uint8 and label.max() <= 2 * T.K
        flags = label > T.K
        colours = {team_of(img, label == c) for c in np.unique(label[flags])}
        assert colours == {
            c - 1 - T.K for c in np.unique(label[flags])
        }  # a flag's class: its colour
        seen |= set(np.unique(label[(label >= 1) & (label <= T.K)]))
    assert seen == {1, 2, 3}  # over 8 images every team occurs


def test_generate_is_deterministic_reused_and_loads_in_a_fresh_process(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    opts = dict(size=64, num_train=3, num_val=2, seed=5)
    T.generate(a, "keyed", False, **opts)
    T.generate(b, "keyed", False, **opts)
    for split in ("img_dir/train", "ann_dir/val"):
        for name in os.listdir(osp.join(a, split)):
            with (
                open(osp.join(a, split, name), "rb") as fa,
                open(osp.join(b, split, name), "rb") as fb,
            ):
                assert fa.read() == fb.read()
    stamp = os.path.getmtime(osp.join(a, "img_dir/train/000000.png"))
    T.generate(a, "keyed", False, **opts)  # complete: reused
    assert os.path.getmtime(osp.join(a, "img_dir/train/000000.png")) == stamp
    code = (
        "import sys\nfrom mmengine.config import Config\n"
        "from mmengine.registry import init_default_scope\n"
        "from mmseg.registry import DATASETS\ninit_default_scope('mmseg')\n"
        "cfg = Config.fromfile('projects/context_lab/configs/lab_task.py').val_dataloader.dataset\n"
        "cfg.data_root = sys.argv[1]\nds = DATASETS.build(cfg)\n"
        "labels = ds[1]['data_samples'].gt_sem_seg.data.unique().tolist()\n"
        "print(type(ds).__name__, len(ds), min(labels))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, a], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-3:] == ["ContextRoomsDataset", "2", "0"]


def test_command_line_writes_the_task(tmp_path):
    out = str(tmp_path / "rooms")
    cmd = [
        sys.executable,
        "-m",
        "projects.context_lab.context_lab.tasks",
        "rooms",
        "--out-dir",
        out,
    ]
    cmd += ["--size", "64", "--num-train", "2", "--num-val", "1"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(os.listdir(osp.join(out, "ann_dir", "train"))) == 2 and osp.isfile(
        osp.join(out, "lab_task.json")
    )
