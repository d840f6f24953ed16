"""The image/label reader of the data checks: every bad file is one line naming it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import cv2
import mmcv
import numpy as np
from mmengine import fileio

from hamseg.utils.messages import first_items


class InvalidSampleError(ValueError):
    """An image or label file is missing, unreadable, corrupt or inconsistent."""


def read_image(path: str, step: Optional[dict] = None, what: str = "image") -> np.ndarray:
    """Decode ``path`` as the pipeline's ``LoadImageFromFile`` step does (``what="label"``:
    ``LoadAnnotations``); a missing, empty, cut or undecodable file raises
    :class:`InvalidSampleError`."""
    step = step or {}
    flag = "unchanged" if what == "label" else step.get("color_type", "color")
    backend = step.get("imdecode_backend", "pillow" if what == "label" else "cv2")
    try:
        data = fileio.get(path, backend_args=step.get("backend_args"))
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
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)
    try:
        array = mmcv.imfrombytes(data, flag=flag, backend=backend)
    except Exception:  # decoders raise anything from OSError to SyntaxError
        array = None
    finally:
        cv2.utils.logging.setLogLevel(level)
    if array is None or array.size == 0:
        raise InvalidSampleError(f"{what} file {path!r} is corrupt or not an image ({backend})")
    return array


def label_problems(
    raw: np.ndarray,
    num_classes: int,
    ignore_index: int = 255,
    reduce_zero_label: bool = False,
    label_map: Optional[dict] = None,
    image_shape: Optional[Sequence[int]] = None,
) -> list[str]:
    """What is wrong with a raw label map: valid values map into ``[0, num_classes)`` or to
    ``ignore_index`` by mmseg's ``reduce_zero_label`` and ``label_map``; > 255 never is."""
    if raw.ndim != 2:
        return [f"a label map must have one channel, but its shape is {tuple(raw.shape)}"]
    problems = []
    if image_shape is not None and raw.shape != tuple(image_shape[:2]):
        h, w = image_shape[:2]
        problems.append(
            f"label size {raw.shape[0]}x{raw.shape[1]} differs from the image's {h}x{w}"
        )
    lut = np.arange(256)  # raw value -> label, as mmseg's LoadAnnotations maps it
    if reduce_zero_label:
        lut = np.where((lut == 0) | (lut == 255), 255, lut - 1)
    source = lut.copy()
    for old, new in (label_map or {}).items():
        lut[source == old] = new
    values = np.unique(raw).astype(np.int64)
    mapped = lut[np.clip(values, 0, 255)]
    bad = (values > 255) | ((mapped >= num_classes) | (mapped < 0)) & (mapped != ignore_index)
    if bad.any():
        how = " after reduce_zero_label" * reduce_zero_label + " and label_map" * bool(label_map)
        problems.append(
            f"label values [{first_items(values[bad].tolist(), 20)}] are outside "
            f"[0, {num_classes}){how} and are not the ignore index {ignore_index}"
        )
    return problems
