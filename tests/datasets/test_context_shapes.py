"""Context Shapes generator: determinism, label design (context decides), mmseg loading, CLI."""

from __future__ import annotations

import hashlib
import json
import os
import os.path as osp
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hamseg  # noqa: F401  (must precede mmseg imports)
from hamseg.datasets.context_shapes import (
    CLASSES,
    PALETTE,
    TEAM_COLOURS,
    ContextShapesConfig,
    draw_sample,
    flag_region,
    generate_context_shapes,
    is_generated,
)

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY = ContextShapesConfig(size=64, num_train=5, num_val=3, seed=3)
K = len(TEAM_COLOURS)


def read_flag_team(img: np.ndarray, side: str, size: int, flag_frac: float) -> int:
    """Team whose colour is nearest to the mean colour of the flag band (the non-local cue)."""
    rows, cols = flag_region(side, size, flag_frac)
    mean = img[rows, cols].reshape(-1, 3).mean(0)
    return int(np.argmin([np.linalg.norm(mean - np.asarray(c)) for c in TEAM_COLOURS]))


def digests(root: str) -> dict[str, str]:
    paths = [osp.join(d, f) for d, _, files in os.walk(root) for f in files]
    return {osp.relpath(p, root): hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths}


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a, b, c = (str(tmp_path / n) for n in "abc")
    generate_context_shapes(a, TINY, progress=False)
    generate_context_shapes(b, TINY, progress=False)
    generate_context_shapes(c, ContextShapesConfig(**{**TINY.__dict__, "seed": 4}), False)
    da, db, dc = digests(a), digests(b), digests(c)
    assert len(da) == 2 * (5 + 3) + 1 and da == db  # images + labels + context_shapes.json
    assert all(da[k] != dc[k] for k in da if k.startswith("img_dir"))
    more = ContextShapesConfig(**{**TINY.__dict__, "num_train": 9})  # sample i: whatever the counts
    assert np.array_equal(draw_sample(more, "train", 4)[0], draw_sample(TINY, "train", 4)[0])


def test_layout_json_and_regeneration(tmp_path):
    root = str(tmp_path / "cs")
    info = generate_context_shapes(root, TINY, progress=False)
    assert is_generated(root) and is_generated(root, TINY)
    assert not is_generated(root, ContextShapesConfig(size=64, num_train=6, num_val=3, seed=3))
    info_path = tmp_path / "cs" / "context_shapes.json"
    assert json.loads(info_path.read_text()) == info
    assert sorted(os.listdir(osp.join(root, "ann_dir", "val"))) == [f"00000{i}.png" for i in "012"]
    generate_context_shapes(root, ContextShapesConfig(size=64, num_train=2, num_val=1), False)
    assert len(os.listdir(osp.join(root, "img_dir", "train"))) == 2  # the larger run's are gone
    info = json.loads(info_path.read_text())
    info_path.write_text(json.dumps({**info, "design_version": -1}))
    assert not is_generated(root)  # another generator version: must be regenerated
    info_path.write_text(json.dumps(info))
    assert is_generated(root)
    os.remove(osp.join(root, "img_dir", "val", "000000.png"))
    assert not is_generated(root)


@pytest.mark.parametrize("index", range(40))
def test_label_is_a_function_of_the_far_flag_only(index):
    """The class of every player equals 1 + the team read from the flag's pixels, and the flag
    is at least a third of the image away from every player."""
    cfg = ContextShapesConfig(size=96)
    img, label, meta = draw_sample(cfg, "train", index)
    team = read_flag_team(img, meta["side"], cfg.size, cfg.flag_frac)
    assert team == meta["team"]
    players = (label >= 1) & (label <= K)
    assert players.any()
    assert set(np.unique(label[players])) == {1 + team}
    rows, cols = flag_region(meta["side"], cfg.size, cfg.flag_frac)
    flag = np.zeros_like(players)
    flag[rows, cols] = True
    assert set(np.unique(label[flag])) == {1 + K + team}
    ys, xs = np.nonzero(players)
    fy, fx = np.nonzero(flag)
    if meta["side"] in ("left", "right"):
        gap = np.abs(xs[:, None] - fx[None, :]).min()
    else:
        gap = np.abs(ys[:, None] - fy[None, :]).min()
    assert gap >= cfg.size // 3


@pytest.mark.parametrize("index", range(10))
def test_changing_only_the_flag_changes_only_the_class(index):
    """Same random state, other team: pixels differ only inside the flag band; the players'
    pixels are identical and their label switches to the new team (class = f(cue))."""
    cfg = ContextShapesConfig(size=96)
    outs = [draw_sample(cfg, "val", index, team=t) for t in range(K)]
    rows, cols = flag_region(outs[0][2]["side"], cfg.size, cfg.flag_frac)
    outside = np.ones((cfg.size, cfg.size), bool)
    outside[rows, cols] = False
    players = (outs[0][1] >= 1) & (outs[0][1] <= K)
    for t, (img, label, meta) in enumerate(outs):
        assert np.array_equal(img[outside], outs[0][0][outside])
        assert np.array_equal((label >= 1) & (label <= K), players)
        assert set(np.unique(label[players])) == {1 + t}
        assert read_flag_team(img, meta["side"], cfg.size, cfg.flag_frac) == t


def test_players_look_the_same_for_every_team():
    """Player pixels are neutral grey from one distribution whatever the team."""
    cfg = ContextShapesConfig(size=96, seed=1)
    greys: dict[int, list[float]] = {t: [] for t in range(K)}
    for i in range(150):
        img, label, meta = draw_sample(cfg, "train", i)
        px = img[(label >= 1) & (label <= K)].astype(float)
        assert np.abs(px[:, 0] - px[:, 1]).max() == 0 and np.abs(px[:, 1] - px[:, 2]).max() == 0
        greys[meta["team"]].append(px.mean())
    means = [np.mean(v) for v in greys.values()]
    assert all(len(v) > 25 for v in greys.values())
    assert max(means) - min(means) < 6.0  # the grey range is 185..245


def test_dataset_class_loads_through_mmseg_pipeline(tmp_path):
    from mmengine.registry import init_default_scope
    from mmseg.registry import DATASETS

    init_default_scope("mmseg")
    root = str(tmp_path / "cs")
    generate_context_shapes(root, TINY, progress=False)
    steps = [dict(type=t) for t in ("LoadImageFromFile", "LoadAnnotations", "PackSegInputs")]
    prefix = dict(img_path="img_dir/train", seg_map_path="ann_dir/train")
    ds = DATASETS.build(
        dict(type="ContextShapesDataset", data_root=root, data_prefix=prefix, pipeline=steps)
    )
    assert len(ds) == 5
    assert ds.metainfo["classes"] == CLASSES and len(ds.metainfo["palette"]) == len(CLASSES)
    sample = ds[0]
    assert tuple(sample["inputs"].shape) == (3, 64, 64)
    values = set(sample["data_samples"].gt_sem_seg.data.unique().tolist())
    assert 0 in values and values <= set(range(len(CLASSES)))
    assert len(PALETTE) == len(CLASSES)


def test_cli_writes_dataset_with_options_and_preview(tmp_path):
    import cv2

    out, preview = str(tmp_path / "cli"), str(tmp_path / "preview.png")
    tool = [sys.executable, "tools/dataset_converters/generate_context_shapes.py"]
    options = f"--size 48 --num-train 3 --num-val 2 --seed 9 --no-progress --preview {preview}"
    cmd = [*tool, "--out-dir", out, *options.split()]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert is_generated(out, ContextShapesConfig(size=48, num_train=3, num_val=2, seed=9))
    # 3 images side by side (4 px gaps) above their label maps.
    assert cv2.imread(preview).shape == (2 * 48 + 4, 3 * 48 + 2 * 4, 3)
    bad = [*tool, "--max-objects", "1", "--min-objects", "2"]
    bad = subprocess.run(bad, cwd=REPO, capture_output=True, timeout=120)
    assert bad.returncode == 2  # one usage line, nothing written
