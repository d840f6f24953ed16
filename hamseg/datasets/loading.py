"""The image/label reader of the data checks: every bad file is one line naming it."""

from __future__ import annotations

from typing import Optional

import cv2
import mmcv
import numpy as np
from mmengine import fileio

from hamseg.utils.errors import first_items


class InvalidSampleError(ValueError):
    """An image or label file is missing, unreadable, corrupt or inconsistent."""


def read_image(path: str, step: Optional[dict] = None, what: str = "image") -> np.ndarray:
    """Decode ``path`` as the pipeline's ``LoadImageFromFile`` (``what="label"``:
    ``LoadAnnotations``) step does; :class:`InvalidSampleError` if it cannot."""
    step = step or {}
    flag = "unchanged" if what == "label" else step.get("color_type", "color")
    backend = step.get("imdecode_backend", "pillow" if what == "label" else "cv2")
    try:
        data = fileio.get(path, backend_args=step.get("backend_args"))
    except OSError as err:  # missing, a folder, no permission
        raise InvalidSampleError(f"{what} file {path!r}: {err.strerror}") from None
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


def sample_problems(sample: tuple[dict, dict, int, int, dict]) -> list[str]:
    """The problems of (image and label load steps, class count, ignore index, mmseg's data info):
    valid labels map into ``[0, num_classes)`` or to the ignore index as mmseg maps them."""
    image_step, label_step, num_classes, ignore, info = sample
    try:
        img = read_image(info["img_path"], image_step)
        if "seg_map_path" not in info:  # a split without labels
            return []
        raw = read_image(path := info["seg_map_path"], label_step, "label").squeeze()
    except InvalidSampleError as err:
        return [str(err)]
    problems = []
    if raw.shape != img.shape[:2]:
        problems.append(f"label shape {raw.shape} differs from the image's {img.shape[:2]}")
    lut = np.arange(256)  # raw value -> label, as mmseg's LoadAnnotations maps it
    if reduce := info.get("reduce_zero_label", False):
        lut = np.where((lut == 0) | (lut == 255), 255, lut - 1)
    label_map = info.get("label_map") or {}
    lut = np.array([label_map.get(int(value), value) for value in lut])
    values = np.unique(raw).astype(np.int64)
    mapped = lut[np.clip(values, 0, 255)]
    bad = (values > 255) | ((mapped < 0) | (mapped >= num_classes)) & (mapped != ignore)
    if bad.any():
        how = " after reduce_zero_label" * reduce + " and label_map" * bool(label_map)
        problems.append(
            f"label values [{first_items(values[bad].tolist(), 20)}] are outside "
            f"[0, {num_classes}){how} and are not the ignore index {ignore}"
        )
    line = f"label file {path!r}: {'; '.join(problems)} (image {info['img_path']!r})"
    return [line] if problems else []
