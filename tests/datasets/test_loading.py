"""The one image reader: BGR as mmcv's LoadImageFromFile decodes it, and a cut JPEG refused from
its bytes on every OpenCV build (some decode it with grey rows), naming the file."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from hamseg.datasets.checks import InvalidSampleError, read_image


def smooth(h: int, w: int) -> np.ndarray:
    y, x = np.mgrid[:h, :w]
    return np.stack([x * 3 % 256, y * 5 % 256, (x + y) % 256], -1).astype(np.uint8)


def write(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


@pytest.fixture(scope="module")
def jpeg() -> bytes:
    data = cv2.imencode(".jpg", smooth(45, 61))[1].tobytes()
    # an APP15 segment holding an end-of-image marker (as an EXIF thumbnail does)
    payload = b"thumb\xff\xd9"
    return data[:2] + b"\xff\xef" + (len(payload) + 2).to_bytes(2, "big") + payload + data[2:]


def test_complete_images_decode_as_the_pipeline_step_says(tmp_path, jpeg):
    png = write(tmp_path / "a.png", cv2.imencode(".png", smooth(45, 61))[1].tobytes())
    assert np.array_equal(read_image(png), smooth(45, 61))  # BGR, as written
    gray = read_image(png, dict(color_type="grayscale", imdecode_backend="pillow"))
    assert gray.shape == (45, 61) and gray.dtype == np.uint8
    full = write(tmp_path / "full.jpg", jpeg)
    tail = write(tmp_path / "tail.jpg", jpeg + b"trailing data (a motion photo's video)")
    assert np.array_equal(read_image(tail), read_image(full))


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.97])
def test_a_cut_jpeg_is_refused_naming_the_file(tmp_path, jpeg, keep):
    cut = write(tmp_path / "cut.jpg", jpeg[: int(len(jpeg) * keep)])
    with pytest.raises(InvalidSampleError, match=r"image file '.*cut\.jpg' is corrupt: trunc"):
        read_image(cut)


def test_unreadable_files_are_one_line(tmp_path):
    (tmp_path / "folder.png").mkdir()
    png = cv2.imencode(".png", smooth(9, 7))[1].tobytes()
    for path, problem in (
        (str(tmp_path / "folder.png"), ": Is a directory"),
        (str(tmp_path / "missing.png"), ": No such file or directory"),
        (write(tmp_path / "empty.jpg", b""), " is corrupt or not an image"),
        (write(tmp_path / "notes.png", b"not an image\n"), " is corrupt or not an image"),
        (write(tmp_path / "cut.png", png[: len(png) // 2]), " is corrupt or not an image"),
    ):
        with pytest.raises(InvalidSampleError) as info:
            read_image(path, what="label")
        assert str(info.value).startswith(f"label file {path!r}{problem}")
        assert "\n" not in str(info.value)
