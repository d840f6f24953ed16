"""tools/infer.py (hamseg.apis.inference): files and folders in, overlays and label maps out; a
bad input is named in one line (on its own line, also under the progress bar) and skipped; a
checkpoint that does not fit, or none, stops with one line and exit code 2."""

from __future__ import annotations

import contextlib
import fcntl
import os
import os.path as osp
import pty
import struct
import subprocess
import sys
import termios

import cv2
import numpy as np
import pytest

from hamseg.apis import inference_model, init_model
from hamseg.apis.inference import gather_inputs, segment_images
from hamseg.datasets.context_shapes import PALETTE
from tests.conftest import REPO
from tests.helpers import DEMO_NMF, make_checkpoint, one_thread, run_tool_here  # noqa: F401

INFER = osp.join(REPO, "tools", "infer.py")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> str:
    return make_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "demo.pth"), seed=1)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    """Odd-sized images in a nested folder (RGB, grayscale, RGBA, 16-bit, JPEG), a truncated JPEG,
    a text file named .png, and a folder elsewhere with a truncated PNG and a listed image."""
    root = tmp_path_factory.mktemp("inputs")
    folder, other = root / "imgs", root / "other"
    (folder / "sub").mkdir(parents=True)
    other.mkdir()
    rng = np.random.default_rng(0)
    cv2.imwrite(str(folder / "odd_rgb.png"), rng.integers(0, 256, (37, 53, 3), dtype=np.uint8))
    cv2.imwrite(str(folder / "gray.png"), rng.integers(0, 256, (41, 29), dtype=np.uint8))
    cv2.imwrite(str(folder / "sub" / "rgba.png"), rng.integers(0, 256, (30, 31, 4), np.uint8))
    cv2.imwrite(str(folder / "sub" / "deep.png"), rng.integers(0, 65536, (25, 27), np.uint16))
    cv2.imwrite(str(folder / "photo.jpg"), rng.integers(0, 256, (19, 23, 3), dtype=np.uint8))
    cv2.imwrite(str(other / "listed.png"), rng.integers(0, 256, (19, 27, 3), dtype=np.uint8))
    jpeg = cv2.imencode(".jpg", rng.integers(0, 256, (40, 48, 3), dtype=np.uint8))[1].tobytes()
    png = cv2.imencode(".png", rng.integers(0, 256, (21, 25, 3), dtype=np.uint8))[1].tobytes()
    bad = root / "bad"
    bad.mkdir()
    (bad / "broken.jpg").write_bytes(jpeg[: len(jpeg) // 2])
    (bad / "notes.png").write_text("meeting notes, not an image\n")
    (other / "cut.png").write_bytes(png[: len(png) // 2])
    return dict(root=str(root), folder=str(folder), other=str(other), bad=str(bad))


def test_gather_inputs_expands_folders_and_takes_each_image_once(inputs, tmp_path):
    folder = inputs["folder"]
    names = ["gray.png", "odd_rgb.png", "photo.jpg", "sub/deep.png", "sub/rgba.png"]
    assert gather_inputs([folder]) == [osp.join(folder, n) for n in names]  # recursive, sorted
    twice = [f"{folder}/photo.jpg", folder, f"{folder}/sub/../photo.jpg"]
    assert gather_inputs(twice) == [twice[0]] + [
        osp.join(folder, n) for n in names if n != "photo.jpg"
    ]
    with pytest.raises(FileNotFoundError, match="nope.png"):
        gather_inputs([folder, str(tmp_path / "nope.png")])


def test_segment_images_writes_mmsegs_overlay_and_the_label_map(ckpt, inputs, tmp_path):
    model = init_model(None, ckpt, "cpu")
    folder, out = inputs["folder"], str(tmp_path / "out")
    paths = gather_inputs([folder])
    done = list(segment_images(model, paths, out, folder, opacity=1.0, save_label=True))
    assert done == [(p, None) for p in paths]
    names = ["gray", "odd_rgb", "photo", "sub__deep", "sub__rgba"]
    assert sorted(os.listdir(out)) == sorted(
        f"{n}_{k}.png" for n in names for k in ("label", "overlay")
    )
    image = cv2.imread(osp.join(folder, "odd_rgb.png"))[:, :, ::-1]
    label = cv2.imread(osp.join(out, "odd_rgb_label.png"), cv2.IMREAD_UNCHANGED)
    expected = inference_model(model, cv2.imread(osp.join(folder, "odd_rgb.png")))
    expected = expected.pred_sem_seg.data[0]
    assert np.array_equal(label, expected.numpy()) and len(np.unique(label)) > 1
    overlay = cv2.imread(osp.join(out, "odd_rgb_overlay.png"))[:, :, ::-1]
    assert np.array_equal(overlay, np.asarray(PALETTE, np.uint8)[label])  # opacity 1: colours
    half = list(segment_images(model, paths[1:2], out, opacity=0.5))  # no folder: its name
    assert half == [(paths[1], None)]
    blended = cv2.imread(osp.join(out, "odd_rgb_overlay.png"))[:, :, ::-1].astype(int)
    expected = (image * 0.5 + np.asarray(PALETTE)[label] * 0.5).astype(np.uint8)
    assert np.abs(blended - expected).max() <= 1
    bad = osp.join(inputs["bad"], "notes.png")
    ((path, why),) = segment_images(model, [bad], out)
    assert path == bad and why.startswith(f"image file {bad!r} is corrupt or not an image")


def infer(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return run_tool_here(INFER, args, monkeypatch, capsys)  # no terminal: no progress bar


def test_bad_inputs_are_named_and_skipped_and_the_rest_written(
    ckpt, inputs, tmp_path, capsys, monkeypatch
):
    """``infer.py bad/* other``: a truncated JPEG, a text file named .png and a truncated PNG are
    named in one line each and skipped, the listed image is written, exit code 1."""
    bad = [osp.join(inputs["bad"], n) for n in sorted(os.listdir(inputs["bad"]))]
    out = tmp_path / "out"
    args = [*bad, inputs["other"], "--checkpoint", ckpt, "--out-dir", str(out)]
    code, stdout, stderr = infer(args, monkeypatch, capsys)
    assert code == 1 and "Traceback" not in stderr, stderr[-2000:]
    lines = stderr.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("error: image file ") for line in lines[:3])
    assert all(line.endswith("; skipped") for line in lines[:3])
    for name in ("broken.jpg", "notes.png", "cut.png"):
        assert sum(name in line for line in lines[:3]) == 1, name
    assert lines[3] == "error: 3 of 4 inputs skipped"
    assert os.listdir(out) == ["listed_overlay.png"] and "wrote 1 overlay(s)" in stdout
    assert "infer:" not in stderr  # no progress bar without a terminal


def test_a_checkpoint_that_does_not_fit_or_none_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    three = make_checkpoint(str(tmp_path / "three.pth"), num_classes=3)
    image = str(tmp_path / "a.png")
    cv2.imwrite(image, np.full((21, 19, 3), 90, np.uint8))
    out = str(tmp_path / "out")
    for args, named in (
        (["--checkpoint", three, "--config", DEMO_NMF], "has 3 classes, the config has 7"),
        (["--checkpoint", str(tmp_path / "nope.pth")], "nope.pth"),
        (["--config", DEMO_NMF], "--checkpoint"),
        (["--backend", "onnxruntime", "--model", "m.onnx"], "--config"),
    ):
        code, _, stderr = infer([image, *args, "--out-dir", out], monkeypatch, capsys)
        assert code == 2 and stderr.count("\n") == 1 and named in stderr, (args, stderr)
        assert stderr.startswith("error: ") and not osp.exists(out)


@pytest.mark.slow
def test_a_skipped_file_is_on_its_own_line_under_the_progress_bar(ckpt, inputs, tmp_path):
    """In a terminal the bar redraws itself with carriage returns: rendered, the error is a line
    of its own (issue 47, point 10). Without a terminal there is no bar (the test above)."""
    notes = osp.join(inputs["bad"], "notes.png")
    image = osp.join(inputs["folder"], "odd_rgb.png")
    args = [INFER, image, notes, "--checkpoint", ckpt, "--out-dir", str(tmp_path)]
    main, tty = pty.openpty()
    fcntl.ioctl(tty, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, *args], stderr=tty, stdout=subprocess.DEVNULL, env=env)
    os.close(tty)
    raw = b""
    with contextlib.suppress(OSError):  # EIO once the child has closed its end
        while chunk := os.read(main, 65536):
            raw += chunk
    proc.wait(timeout=600)
    rendered = []
    for line in raw.decode().replace("\r\n", "\n").split("\n"):
        screen = ""
        for part in line.split("\r"):  # a carriage return overwrites from column 0
            screen = part + screen[len(part) :]
        rendered.append(screen.rstrip())
    assert proc.returncode == 1, raw[-2000:]
    errors = [line for line in rendered if "notes.png" in line]
    assert (
        len(errors) == 1 and errors[0].startswith("error: image file") and "infer" not in errors[0]
    )
    assert any(line.startswith("infer: 100%") for line in rendered), rendered
