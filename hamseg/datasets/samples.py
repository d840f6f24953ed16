"""One sample: read an image or label map completely, check the label values.

Used by the checked loading transforms (:mod:`hamseg.datasets.transforms`) while a run loads
data, and by :func:`~hamseg.datasets.validation.validate_dataset` on a whole split. Every problem
is a sentence naming the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import mmcv
import numpy as np
from mmengine import fileio

from hamseg.utils.messages import first_items

__all__ = [
    "InvalidSampleError",
    "SampleCheck",
    "check_sample",
    "label_problems",
    "read_image",
    "read_label",
]


class InvalidSampleError(ValueError):
    """An image or label file is missing, unreadable, corrupt or inconsistent.

    The message names the file(s) and the problem. Constructed from the message alone, so the
    error keeps its type when a DataLoader worker re-raises it in the main process.
    """


def _read_bytes(path: str, what: str, backend_args: Optional[dict]) -> bytes:
    try:
        data = fileio.get(path, backend_args=backend_args)
    except FileNotFoundError:
        raise InvalidSampleError(f"{what} file {path!r} does not exist") from None
    except (OSError, ValueError) as err:
        raise InvalidSampleError(f"{what} file {path!r} cannot be read: {err}") from None
    if not data:
        raise InvalidSampleError(f"{what} file {path!r} is empty (0 bytes)")
    return data


def _decode(data: bytes, path: str, what: str, flag: str, backend: str) -> np.ndarray:
    reason = ""
    try:
        array = mmcv.imfrombytes(data, flag=flag, backend=backend)
    except Exception as err:  # decoders raise anything from OSError to SyntaxError
        array, reason = None, f": {type(err).__name__}: {err}"
    if array is None or array.size == 0:
        raise InvalidSampleError(
            f"{what} file {path!r} is corrupt or not an image (the {backend} decoder could "
            f"not decode its {len(data)} bytes{reason})"
        )
    return array


def read_image(
    path: str,
    color_type: str = "color",
    backend: str = "cv2",
    backend_args: Optional[dict] = None,
) -> np.ndarray:
    """Read an image as mmcv's ``LoadImageFromFile`` does, or raise :class:`InvalidSampleError`.

    Args:
        path: Image file.
        color_type: mmcv flag ('color', 'grayscale', 'unchanged').
        backend: mmcv decode backend ('cv2', 'pillow', ...).
        backend_args: mmengine file backend arguments.

    Returns:
        The decoded image (H, W[, C]).
    """
    return _decode(_read_bytes(path, "image", backend_args), path, "image", color_type, backend)


def read_label(
    path: str, backend: str = "pillow", backend_args: Optional[dict] = None
) -> np.ndarray:
    """Read a label map with its raw values (no uint8 cast), or raise :class:`InvalidSampleError`.

    Args:
        path: Label file (PNG of class indices, palette PNGs included).
        backend: mmcv decode backend; mmseg's ``LoadAnnotations`` default is 'pillow'.
        backend_args: mmengine file backend arguments.

    Returns:
        The label map, squeezed like mmseg does (normally (H, W)), in its file's integer dtype.
    """
    data = _read_bytes(path, "label", backend_args)
    return _decode(data, path, "label", "unchanged", backend).squeeze()


def _label_lut(reduce_zero_label: bool, label_map: Optional[dict]) -> np.ndarray:
    """Raw value (0..255) -> training label, exactly as mmseg's ``LoadAnnotations`` maps it."""
    lut = np.arange(256, dtype=np.int64)
    if reduce_zero_label:  # 0 -> 255 (ignore), v -> v - 1, 255 stays 255
        lut = np.where(lut == 0, 255, lut - 1)
        lut[lut == 254] = 255
    if label_map:
        source = lut.copy()
        for old, new in label_map.items():
            lut[source == old] = new
    return lut


def label_problems(
    raw: np.ndarray,
    num_classes: int,
    ignore_index: int = 255,
    reduce_zero_label: bool = False,
    label_map: Optional[dict] = None,
    image_shape: Optional[Sequence[int]] = None,
) -> tuple[Optional[np.ndarray], list[str]]:
    """Check a raw label map and map it to training labels.

    Args:
        raw: Label map as read by :func:`read_label`.
        num_classes: Valid labels are ``0 .. num_classes - 1`` ...
        ignore_index: ... and this value.
        reduce_zero_label: The dataset's ``reduce_zero_label`` (0 -> ignore, v -> v - 1).
        label_map: The dataset's ``label_map`` (custom class subsets), applied afterwards.
        image_shape: (H, W[, C]) of the image, to compare sizes; None to skip.

    Returns:
        The uint8 training label map (None if there are problems) and the list of problems.
    """
    problems = []
    if raw.ndim != 2:
        return None, [f"a label map must have one channel, but its shape is {tuple(raw.shape)}"]
    if image_shape is not None and tuple(raw.shape) != tuple(image_shape[:2]):
        problems.append(
            f"label size {raw.shape[0]}x{raw.shape[1]} (HxW) differs from the image size "
            f"{image_shape[0]}x{image_shape[1]}"
        )
    values = np.unique(raw)
    if values.dtype.kind not in "ui":
        values = values.astype(np.int64)
    lut = _label_lut(reduce_zero_label, label_map)
    in_byte = (values >= 0) & (values <= 255)
    mapped = np.where(in_byte, lut[np.clip(values, 0, 255).astype(np.int64)], -1)
    valid = in_byte & (((mapped >= 0) & (mapped < num_classes)) | (mapped == ignore_index))
    bad = values[~valid]
    if bad.size:
        shown = first_items([int(v) for v in bad], 20)
        how = " after reduce_zero_label" if reduce_zero_label else ""
        how += " and label_map" if label_map else ""
        problems.append(
            f"label values [{shown}] are outside [0, {num_classes}){how} and are not the "
            f"ignore index {ignore_index}"
        )
    if problems:
        return None, problems
    return lut[raw.astype(np.int64)].astype(np.uint8), []


@dataclass(frozen=True)
class SampleCheck:
    """Settings of the per-sample check (picklable, for worker processes)."""

    num_classes: int
    ignore_index: int = 255
    reduce_zero_label: bool = False
    label_map: Optional[dict] = None
    image_backend: str = "cv2"
    label_backend: str = "pillow"
    backend_args: Optional[dict] = None


def check_sample(img_path: str, seg_map_path: Optional[str], check: SampleCheck) -> list[str]:
    """Every problem of one sample, each a full sentence naming the file; [] if it is fine."""
    problems: list[str] = []
    image = None
    try:
        image = read_image(img_path, backend=check.image_backend, backend_args=check.backend_args)
    except InvalidSampleError as err:
        problems.append(str(err))
    if seg_map_path is None:
        return problems
    try:
        raw = read_label(seg_map_path, check.label_backend, check.backend_args)
    except InvalidSampleError as err:
        return [*problems, str(err)]
    _, found = label_problems(
        raw,
        check.num_classes,
        check.ignore_index,
        check.reduce_zero_label,
        check.label_map,
        None if image is None else image.shape,
    )
    problems.extend(f"label file {seg_map_path!r}: {p} (image {img_path!r})" for p in found)
    return problems
