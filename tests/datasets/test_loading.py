"""The one image reader: BGR as mmcv loads it, 8-bit RGB for inference, and a cut JPEG refused
from its bytes on every OpenCV build (some decode it with grey rows), naming the file."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from hamseg.datasets.loading import InvalidSampleError, read_image, read_image_rgb


def _smooth(h: int, w: int) -> np.ndarray:
    y, x = np.mgrid[:h, :w]
    return np.stack([x * 3 % 256, y * 5 % 256, (x + y) % 256], -1).astype(np.uint8)


def _write(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


@pytest.fixture(scope="module")
def jpeg() -> bytes:
    data = cv2.imencode(".jpg", _smooth(45, 61))[1].tobytes()
    # an APP15 segment holding an end-of-image marker (as an EXIF thumbnail does)
    payload = b"thumb\xff\xd9"
    return data[:2] + b"\xff\xef" + (len(payload) + 2).to_bytes(2, "big") + payload + data[2:]


def test_complete_images_decode_as_mmcv_and_as_rgb(tmp_path, jpeg):
    png = _write(tmp_path / "a.png", cv2.imencode(".png", _smooth(45, 61))[1].tobytes())
    assert np.array_equal(read_image(png), _smooth(45, 61))  # BGR, as written
    assert np.array_equal(read_image_rgb(png), _smooth(45, 61)[:, :, ::-1])
    full = _write(tmp_path / "full.jpg", jpeg)
    assert read_image(full).shape == read_image_rgb(full).shape == (45, 61, 3)
    tail = _write(tmp_path / "tail.jpg", jpeg + b"trailing data (a motion photo's video)")
    assert np.array_equal(read_image(tail), read_image(full))


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.97])
def test_a_cut_jpeg_is_refused_naming_the_file(tmp_path, jpeg, keep):
    cut = _write(tmp_path / "cut.jpg", jpeg[: int(len(jpeg) * keep)])
    for read in (read_image, read_image_rgb):
        with pytest.raises(InvalidSampleError, match=r"image file '.*cut\.jpg' is corrupt: trunc"):
            read(cut)


def test_rgb_of_gray_alpha_and_16_bit(tmp_path):
    gray = _write(tmp_path / "g.png", cv2.imencode(".png", _smooth(9, 7)[:, :, 0])[1].tobytes())
    assert np.array_equal(read_image_rgb(gray), np.repeat(_smooth(9, 7)[:, :, :1], 3, axis=2))
    rgba = np.dstack([_smooth(9, 7), np.zeros((9, 7), np.uint8)])  # transparent: white
    assert (
        read_image_rgb(_write(tmp_path / "a.png", cv2.imencode(".png", rgba)[1].tobytes())) == 255
    ).all()
    deep = np.full((9, 7), 65535, np.uint16)
    assert (
        read_image_rgb(_write(tmp_path / "d.png", cv2.imencode(".png", deep)[1].tobytes())) == 255
    ).all()


def test_unreadable_files_are_one_line(tmp_path):
    (tmp_path / "folder.png").mkdir()
    text = _write(tmp_path / "notes.png", b"not an image\n")
    for path, problem in (
        (str(tmp_path / "folder.png"), "cannot be read"),
        (str(tmp_path / "missing.png"), "does not exist"),
        (_write(tmp_path / "empty.jpg", b""), "is empty (0 bytes)"),
        (text, "is corrupt or not an image"),
    ):
        with pytest.raises(InvalidSampleError) as info:
            read_image_rgb(path)
        assert str(info.value).startswith(f"image file {path!r} {problem}")
        assert "\n" not in str(info.value)
