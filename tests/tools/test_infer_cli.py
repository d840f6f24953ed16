"""tools/infer.py as a user runs it (real files, real processes): bad inputs are named and skipped,
a checkpoint of another class count or a missing checkpoint stops with one line and exit 2."""

from __future__ import annotations

import os
import os.path as osp
import shlex
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
    assert broken.startswith(
        f"error: image file {str(folder / 'broken.jpg')!r} is corrupt: truncated"
    )
    assert broken.endswith("; skipped")
    assert notes.startswith(f"error: image file {str(folder / 'notes.png')!r} is corrupt or not")
    assert summary == "error: 2 of 4 inputs skipped (listed above)"
    assert sorted(os.listdir(out)) == ["good2_overlay.png", "good_overlay.png"]
    for name in os.listdir(out):
        assert cv2.imread(str(out / name)) is not None
    assert proc.stdout.strip().splitlines()[-1] == f"wrote 2 overlay(s) to {out}"


def test_a_shell_glob_with_a_truncated_jpeg_notes_and_a_list_with_a_missing_image(ckpt3, tmp_path):
    """`infer.py imgs/* ...`: the glob catches notes.txt (prose) and list.txt, which names a
    good image, a missing one and a truncated PNG. Each bad input is one line, skipped; every
    good image is written; exit code 1."""
    folder, other = tmp_path / "imgs", tmp_path / "other"
    folder.mkdir()
    other.mkdir()
    rng = np.random.default_rng(1)
    cv2.imwrite(str(folder / "good.png"), rng.integers(0, 256, (23, 31, 3), dtype=np.uint8))
    cv2.imwrite(str(folder / "good2.jpg"), rng.integers(0, 256, (17, 29, 3), dtype=np.uint8))
    cv2.imwrite(str(other / "listed.png"), rng.integers(0, 256, (19, 27, 3), dtype=np.uint8))
    data = cv2.imencode(".jpg", rng.integers(0, 256, (40, 48, 3), dtype=np.uint8))[1].tobytes()
    (folder / "broken.jpg").write_bytes(data[: len(data) // 2])  # truncated JPEG
    data = cv2.imencode(".png", rng.integers(0, 256, (21, 25, 3), dtype=np.uint8))[1].tobytes()
    (other / "cut.png").write_bytes(data[: len(data) // 2])  # truncated PNG
    (folder / "notes.txt").write_text("Notes from the field trip.\nThe light was poor.\n")
    (folder / "list.txt").write_text("../other/listed.png\nmissing.png\n../other/cut.png\n")
    out = tmp_path / "out"
    cmd = (
        f"{shlex.quote(sys.executable)} tools/infer.py {shlex.quote(str(folder))}/* "
        f"--checkpoint {shlex.quote(ckpt3)} --out-dir {shlex.quote(str(out))} --no-progress"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        cmd, shell=True, cwd=REPO, capture_output=True, text=True, timeout=600, env=env
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 5, proc.stderr
    *skipped, summary = errors
    assert all(line.endswith("; skipped") for line in skipped), skipped
    expected = [
        f"error: image listed in {folder / 'list.txt'} not found: missing.png",
        f"error: {folder / 'notes.txt'}: a .txt input is a list of image paths",
        f"error: image file {str(folder / 'broken.jpg')!r} is corrupt: truncated",
        f"error: image file {str(other / 'cut.png')!r} is corrupt or not an image",
    ]
    for start in expected:
        assert sum(line.startswith(start) for line in skipped) == 1, (start, skipped)
    assert summary == "error: 4 of 7 inputs skipped (listed above)"
    assert sorted(os.listdir(out)) == [
        "good2_overlay.png",
        "good_overlay.png",
        "listed_overlay.png",
    ]
    for name in os.listdir(out):
        assert cv2.imread(str(out / name)) is not None


def test_missing_checkpoint_is_one_line_exit_2(tmp_path):
    img = str(tmp_path / "a.png")
    cv2.imwrite(img, np.zeros((9, 9, 3), np.uint8))
    missing = str(tmp_path / "nope.pth")
    proc = infer(img, "--checkpoint", missing, "--out-dir", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr == f"error: checkpoint file not found: {missing}\n"  # as tools/test.py


def test_without_checkpoint_is_one_line_exit_2(tmp_path):
    """Only --backend onnxruntime runs without weights, and then needs --config."""
    img = str(tmp_path / "a.png")
    cv2.imwrite(img, np.zeros((9, 9, 3), np.uint8))
    out = str(tmp_path / "out")
    proc = infer(img, "--config", DEMO_NMF, "--out-dir", out)
    assert proc.returncode == 2 and proc.stderr.startswith(
        "error: --checkpoint CHECKPOINT is required: the trained weights (only --backend "
        "onnxruntime --model FILE.onnx --config CONFIG runs without them)\n"
    ), proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1
    proc = infer(img, "--backend", "onnxruntime", "--model", "m.onnx", "--out-dir", out)
    assert proc.returncode == 2 and proc.stderr == (
        "error: --backend onnxruntime without --checkpoint needs --config CONFIG: the test "
        "pipeline, class names and palette come from it\n"
    )
    assert not osp.exists(out)


def test_config_dataset_meta_takes_the_config_metainfo_and_the_class_palette():
    from mmengine.config import Config

    from hamseg.apis.inference import config_dataset_meta
    from hamseg.datasets.context_shapes import CLASSES, PALETTE

    cfg = Config.fromfile(DEMO_NMF)
    assert config_dataset_meta(cfg) == dict(
        classes=list(CLASSES), palette=[list(c) for c in PALETTE]
    )
    cfg.test_dataloader.dataset.metainfo = dict(classes=[CLASSES[2], CLASSES[0]])
    assert config_dataset_meta(cfg) == dict(
        classes=[CLASSES[2], CLASSES[0]], palette=[list(PALETTE[2]), list(PALETTE[0])]
    )
    cfg.test_dataloader.dataset.metainfo = dict(classes=["road", "sky"])
    assert config_dataset_meta(cfg) == dict(classes=["road", "sky"], palette=None)
