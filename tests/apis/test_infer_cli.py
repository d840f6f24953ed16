"""tools/infer.py as a user runs it (real files, real processes): bad inputs are named and skipped,
a checkpoint of another class count or a missing checkpoint stops with one line and exit 2."""

from __future__ import annotations

import os
import os.path as osp
import subprocess
import sys

import cv2
import numpy as np
import pytest

from tests.conftest import REPO
from tests.helpers import DEMO_NMF, make_checkpoint


def infer(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, osp.join(REPO, "tools", "infer.py"), *args, "--no-progress"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture(scope="module")
def ckpt3(tmp_path_factory) -> str:
    """A 3-class demo checkpoint (its stored config has 3 classes)."""
    return make_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "three.pth"), num_classes=3)


def test_checkpoint_of_another_class_count_is_one_line_exit_2(ckpt3, tmp_path):
    cfg = tmp_path / "five_classes.py"
    cfg.write_text(f"_base_ = [{DEMO_NMF!r}]\nmodel = dict(decode_head=dict(num_classes=5))\n")
    img = str(tmp_path / "a.png")
    cv2.imwrite(img, np.full((21, 19, 3), 90, np.uint8))
    out = tmp_path / "out"
    proc = infer(img, "--checkpoint", ckpt3, "--config", str(cfg), "--out-dir", str(out))
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert lines[0].startswith(f"error: checkpoint {ckpt3!r} does not fit the model: ")
    assert (
        "decode_head.conv_seg.weight is (3, 128, 1, 1) in the checkpoint and (5, 128, 1, 1) in "
        "the model: the checkpoint has 3 classes, the config has 5" in lines[0]
    )
    assert not out.exists()  # nothing predicted with a random classifier


def test_bad_inputs_are_named_and_skipped_the_rest_written(ckpt3, tmp_path):
    folder = tmp_path / "imgs"
    folder.mkdir()
    rng = np.random.default_rng(0)
    cv2.imwrite(str(folder / "good.png"), rng.integers(0, 256, (23, 31, 3), dtype=np.uint8))
    cv2.imwrite(str(folder / "good2.jpg"), rng.integers(0, 256, (17, 29, 3), dtype=np.uint8))
    data = cv2.imencode(".jpg", rng.integers(0, 256, (40, 48, 3), dtype=np.uint8))[1].tobytes()
    (folder / "broken.jpg").write_bytes(data[: len(data) // 2])  # truncated JPEG
    (folder / "notes.png").write_text("meeting notes, not an image\n")
    out = tmp_path / "out"
    proc = infer(str(folder), "--checkpoint", ckpt3, "--out-dir", str(out))
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 3, proc.stderr
    broken, notes, summary = errors
    assert broken.startswith(f"error: {folder / 'broken.jpg'}: not a complete image")
    assert broken.endswith("; skipped")
    assert notes.startswith(f"error: {folder / 'notes.png'}: not an image")
    assert summary == "error: 2 of 4 inputs skipped (listed above)"
    assert sorted(os.listdir(out)) == ["good2_overlay.png", "good_overlay.png"]
    for name in os.listdir(out):
        assert cv2.imread(str(out / name)) is not None
    assert proc.stdout.strip().splitlines()[-1] == f"wrote 2 overlay(s) to {out}"


def test_missing_checkpoint_is_one_line_exit_2(tmp_path):
    img = str(tmp_path / "a.png")
    cv2.imwrite(img, np.zeros((9, 9, 3), np.uint8))
    missing = str(tmp_path / "nope.pth")
    proc = infer(img, "--checkpoint", missing, "--out-dir", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr == f"error: checkpoint file not found: {missing}\n"  # as tools/test.py
