"""The one image/label reader of the data checks: every bad file is one line naming it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import cv2
import mmcv
import numpy as np
from mmengine import fileio

from hamseg.utils.errors import first_items


class InvalidSampleError(ValueError):
    """An image or label file is missing, unreadable, corrupt or inconsistent (built from its
    message alone: it keeps its type when a DataLoader worker re-raises it)."""


def read_image(
    path: str,
    flag: str = "color",
    backend: str = "cv2",
    backend_args: Optional[dict] = None,
    what: str = "image",
) -> np.ndarray:
    """Decode an image as mmcv's ``LoadImageFromFile`` does (BGR (H, W[, C])); raises
    :class:`InvalidSampleError` if it is missing, empty, truncated (JPEG) or undecodable."""
    try:
        data = fileio.get(path, backend_args=backend_args)
    except FileNotFoundError:
        raise InvalidSampleError(f"{what} file {path!r} does not exist") from None
    except (OSError, ValueError) as err:
        raise InvalidSampleError(f"{what} file {path!r} cannot be read: {err}") from None
    if not data:
        raise InvalidSampleError(f"{what} file {path!r} is empty (0 bytes)")
    # a cut JPEG decodes with grey rows on some OpenCV builds: no end marker after its last scan
    scan = data.rfind(b"\xff\xda")
    if data[:2] == b"\xff\xd8" and (scan < 0 or data.rfind(b"\xff\xd9") < scan):
        raise InvalidSampleError(f"{what} file {path!r} is corrupt: truncated (no JPEG end marker)")
    level = cv2.utils.logging.getLogLevel()
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)  # we say it in one line
    try:
        array = mmcv.imfrombytes(data, flag=flag, backend=backend)
    except Exception:  # decoders raise anything from OSError to SyntaxError
        array = None
    finally:
        cv2.utils.logging.setLogLevel(level)
    if array is None or array.size == 0:
        raise InvalidSampleError(
            f"{what} file {path!r} is corrupt or not an image ({backend} decoder)"
        )
    return array


def read_image_rgb(path: str, backend_args: Optional[dict] = None) -> np.ndarray:
    """Any common image as 8-bit RGB (H, W, 3) for inference: gray replicated, alpha composited
    over white, 16-bit or float rescaled; raises as :func:`read_image`."""
    img = read_image(path, "unchanged", "cv2", backend_args)
    if img.dtype != np.uint8:
        img = img.astype(np.float64)
        hi = 65535.0 if img.max() > 255 else (1.0 if img.max() <= 1.0 else 255.0)
        img = np.clip(img / hi * 255.0, 0, 255).astype(np.uint8)
    if img.ndim == 2 or img.shape[2] == 1:
        return np.repeat(img.reshape(*img.shape[:2], 1), 3, axis=2)
    if img.shape[2] == 4:
        alpha = img[:, :, 3:4].astype(np.float32) / 255.0
        img = np.round(img[:, :, :3] * alpha + 255.0 * (1.0 - alpha)).astype(np.uint8)
    return cv2.cvtColor(img[:, :, :3], cv2.COLOR_BGR2RGB)


def label_problems(
    raw: np.ndarray,
    num_classes: int,
    ignore_index: int = 255,
    reduce_zero_label: bool = False,
    label_map: Optional[dict] = None,
    image_shape: Optional[Sequence[int]] = None,
) -> list[str]:
    """What is wrong with a raw label map (palette PNGs read as indices): valid are
    ``0 .. num_classes - 1`` and ``ignore_index`` after mmseg's ``reduce_zero_label`` and
    ``label_map``; values above 255 (16-bit PNGs, which mmseg's uint8 cast would wrap) are not;
    its size is ``image_shape``'s."""
    if raw.ndim != 2:
        return [f"a label map must have one channel, but its shape is {tuple(raw.shape)}"]
    problems = []
    if image_shape is not None and tuple(raw.shape) != tuple(image_shape[:2]):
        h, w = image_shape[:2]
        problems.append(
            f"label size {raw.shape[0]}x{raw.shape[1]} differs from the image's {h}x{w}"
        )
    lut = np.arange(256, dtype=np.int64)  # raw value -> label, as mmseg's LoadAnnotations maps
    if reduce_zero_label:  # 0 -> 255 (ignore), v -> v - 1, 255 stays 255
        lut = np.where((lut == 0) | (lut == 255), 255, lut - 1)
    source = lut.copy()
    for old, new in (label_map or {}).items():
        lut[source == old] = new
    values = np.unique(raw).astype(np.int64)
    mapped = lut[np.clip(values, 0, 255)]
    valid = (values >= 0) & (values <= 255)
    valid &= ((mapped >= 0) & (mapped < num_classes)) | (mapped == ignore_index)
    if not valid.all():
        how = " after reduce_zero_label" if reduce_zero_label else ""
        how += " and label_map" if label_map else ""
        problems.append(
            f"label values [{first_items(values[~valid].tolist(), 20)}] are outside "
            f"[0, {num_classes}){how} and are not the ignore index {ignore_index}"
        )
    return problems
