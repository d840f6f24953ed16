"""Input images for inference: expand files, folders and lists; decode completely or refuse.

:func:`gather_inputs` expands the inputs and sets aside, with a one-line message, what a
``.txt`` list names that does not exist (or a ``.txt`` input that is not a list of images).

OpenCV decodes what it can of a damaged file: a truncated JPEG read with ``cv2.imread`` comes back
as an image whose missing part is grey (libjpeg only prints "Premature end of JPEG file"), and a
model would segment the grey fill. :func:`read_image_rgb` therefore also decodes the whole file
with Pillow, whose decoders raise on a truncated stream, and raises :class:`ImageDecodeError`
naming the file for anything that is not a complete image.
"""

from __future__ import annotations

import contextlib
import io
import os
import os.path as osp
import warnings
from collections.abc import Iterator, Sequence

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

from hamseg.datasets.loading import InvalidSampleError

__all__ = [
    "IMAGE_EXTENSIONS",
    "ImageDecodeError",
    "collect_inputs",
    "gather_inputs",
    "read_image_rgb",
    "to_rgb8",
]

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm")


class ImageDecodeError(InvalidSampleError):
    """An input file is unreadable, not an image, or not a complete image."""


def gather_inputs(inputs: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Expand files, folders (recursive, sorted) and ``.txt`` lists into image paths; set aside
    what a list names that cannot be an image input.

    A ``.txt`` input is a list of image paths, one a line (``#`` comments and blank lines
    skipped; relative paths from the working directory, else from the list's folder). Set aside,
    each with a one-line message naming it: a listed path that does not exist, and a ``.txt``
    file that is not such a list (no line names an image file or an existing file, e.g. notes in
    prose; not UTF-8 text; unreadable). Listed files that exist but are not complete images are
    returned like any other path: reading them (:func:`read_image_rgb`) names them.

    Args:
        inputs: Image files, folders, ``.txt`` lists (what tools/infer.py is given).

    Returns:
        The image paths, in input order, each file once (named twice, e.g. directly and in a
        list, it is written once: the outputs are named after it), and the (path, message)
        pairs set aside.

    Raises:
        FileNotFoundError: If an input given directly (not listed) does not exist.
    """
    paths: list[str] = []
    skipped: list[tuple[str, str]] = []
    for item in inputs:
        if osp.isdir(item):
            found = []
            for root, _, files in os.walk(item):
                found += [osp.join(root, f) for f in files if f.lower().endswith(IMAGE_EXTENSIONS)]
            paths += sorted(found)
        elif item.lower().endswith(".txt") and osp.isfile(item):
            listed, problem = _read_list(item)
            if problem:
                skipped.append((item, f"{item}: {problem}"))
                continue
            for line, path in listed:
                if osp.isfile(path):
                    paths.append(path)
                else:
                    skipped.append((path, f"image listed in {item} not found: {line}"))
        elif osp.isfile(item):
            paths.append(item)
        else:
            what = "image list" if item.lower().endswith(".txt") else "input"
            raise FileNotFoundError(f"{what} not found: {item}")
    unique: dict[str, str] = {}
    for path in paths:
        unique.setdefault(osp.realpath(path), path)
    return list(unique.values()), skipped


def _read_list(item: str) -> tuple[list[tuple[str, str]], str]:
    """(line, resolved path) of each entry of a ``.txt`` list, or [] and why it is not a list."""
    try:
        with open(item, encoding="utf-8") as f:
            lines = [line.strip() for line in f]
    except UnicodeDecodeError:
        return [], "a .txt input is a list of image paths, but it is not UTF-8 text"
    except OSError as err:
        return [], f"cannot be read ({err.strerror or err})"
    base = osp.dirname(item)
    entries = [
        (line, line if osp.isabs(line) or osp.exists(line) else osp.normpath(osp.join(base, line)))
        for line in lines
        if line and not line.startswith("#")
    ]
    if not entries:
        return [], "a .txt input is a list of image paths, one a line, but it lists none"
    if not any(p.lower().endswith(IMAGE_EXTENSIONS) or osp.isfile(p) for _, p in entries):
        first = entries[0][0]
        shown = first if len(first) <= 40 else first[:37] + "..."
        return [], (
            "a .txt input is a list of image paths, one a line, but no line of it names an "
            f"image or an existing file (line 1: {shown!r})"
        )
    return entries, ""


def collect_inputs(inputs: Sequence[str]) -> list[str]:
    """:func:`gather_inputs`, strictly: anything it sets aside is an error.

    Raises:
        FileNotFoundError: If an input, or a path listed in a ``.txt`` file, does not exist, or
            a ``.txt`` input is not a list of image paths.
    """
    paths, skipped = gather_inputs(inputs)
    if skipped:
        raise FileNotFoundError(skipped[0][1])
    return paths


@contextlib.contextmanager
def _quiet_opencv() -> Iterator[None]:
    """Silence OpenCV's own log lines (the caller reports a failed decode in one line)."""
    level = cv2.utils.logging.getLogLevel()
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)
    try:
        yield
    finally:
        cv2.utils.logging.setLogLevel(level)


def _check_complete(data: bytes, path: str) -> None:
    """Decode ``data`` fully with Pillow; raise if its decoder finds the stream cut or broken.

    Formats Pillow does not know are left to OpenCV's verdict, and so are images above Pillow's
    decompression-bomb limit (OpenCV has decoded them already).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # EXIF and bomb warnings: the decode below decides
        try:
            with Image.open(io.BytesIO(data)) as image:
                image.load()
        except (UnidentifiedImageError, Image.DecompressionBombError):
            return
        except (OSError, SyntaxError, ValueError, EOFError) as err:
            raise ImageDecodeError(f"{path}: not a complete image ({err})") from None


def to_rgb8(img: np.ndarray) -> np.ndarray:
    """OpenCV's decoded array (BGR[A] or gray, any depth) as 8-bit RGB (H, W, 3).

    Grayscale is replicated to three channels, an alpha channel is composited over white, and
    16-bit or float images are rescaled to 0..255.
    """
    if img.dtype != np.uint8:
        img = img.astype(np.float64)
        hi = 65535.0 if img.max() > 255 else (1.0 if img.max() <= 1.0 else 255.0)
        img = np.clip(img / hi * 255.0, 0, 255).astype(np.uint8)
    if img.ndim == 2:
        return np.repeat(img[:, :, None], 3, axis=2)
    if img.shape[2] == 1:
        return np.repeat(img, 3, axis=2)
    if img.shape[2] == 4:
        alpha = img[:, :, 3:4].astype(np.float32) / 255.0
        bgr = img[:, :, :3].astype(np.float32) * alpha + 255.0 * (1.0 - alpha)
        img = np.round(bgr).astype(np.uint8)
    return cv2.cvtColor(img[:, :, :3], cv2.COLOR_BGR2RGB)


def read_image_rgb(path: str) -> np.ndarray:
    """Read any common image completely as 8-bit RGB (H, W, 3) (see :func:`to_rgb8`).

    Raises:
        ImageDecodeError: If the file cannot be read, is empty, is not an image, or is not a
            complete one (a truncated JPEG or PNG, say); the message names the file.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise ImageDecodeError(f"{path}: cannot be read ({err.strerror or err})") from None
    if not data:
        raise ImageDecodeError(f"{path}: empty file (0 bytes)")
    _check_complete(data, path)
    with _quiet_opencv():
        img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    if img is None or img.size == 0:
        raise ImageDecodeError(f"{path}: not an image ({len(data)} bytes OpenCV cannot decode)")
    return to_rgb8(img)
