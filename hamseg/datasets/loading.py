"""Checked loading: the one image/label reader and the loading transforms built on it.

Every bad file is an :class:`InvalidSampleError` whose one-line message names the file and the
problem; :class:`CheckedLoadImageFromFile` / :class:`CheckedLoadAnnotations` are drop-ins for
mmcv's ``LoadImageFromFile`` / mmseg's ``LoadAnnotations`` (docs/robustness.md, "Bad data").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import cv2
import mmcv
import numpy as np
from mmcv.transforms import LoadImageFromFile
from mmengine import fileio
from mmseg.datasets.transforms import LoadAnnotations
from mmseg.registry import TRANSFORMS

from hamseg.utils.messages import first_items


class InvalidSampleError(ValueError):
    """An image or label file is missing, unreadable, corrupt or inconsistent (built from its
    message alone: it keeps its type when a DataLoader worker re-raises it)."""


def _jpeg_cut(data: bytes) -> bool:
    """Whether JPEG bytes end before the end-of-image marker after the first scan (some OpenCV
    builds fill a cut JPEG with grey rows). Headers are skipped by their lengths (a thumbnail's
    marker does not count); in the scans 0xFF is stuffed, so 0xFFD9 is the real end."""
    pos = 2
    while pos + 4 <= len(data) and data[pos] == 0xFF:
        marker = data[pos + 1]
        if marker == 0xFF or 0xD0 <= marker <= 0xD7 or marker == 0x01:  # fill / no length
            pos += 1 if marker == 0xFF else 2
            continue
        end = pos + 2 + int.from_bytes(data[pos + 2 : pos + 4], "big")
        if marker == 0xDA:  # start of scan
            return data.find(b"\xff\xd9", end) == -1
        pos = end
    return pos + 4 > len(data)  # headers cut; a malformed header is left to the decoder


def read_image(
    path: str,
    color_type: str = "color",
    backend: str = "cv2",
    backend_args: Optional[dict] = None,
    what: str = "image",
) -> np.ndarray:
    """Read an image as mmcv's ``LoadImageFromFile`` does (BGR (H, W[, C])), decoding it once;
    :class:`InvalidSampleError` naming the ``what`` file if it is missing, unreadable, empty,
    truncated (JPEG) or undecodable."""
    try:
        data = fileio.get(path, backend_args=backend_args)
    except FileNotFoundError:
        raise InvalidSampleError(f"{what} file {path!r} does not exist") from None
    except (OSError, ValueError) as err:
        raise InvalidSampleError(f"{what} file {path!r} cannot be read: {err}") from None
    if not data:
        raise InvalidSampleError(f"{what} file {path!r} is empty (0 bytes)")
    if data[:2] == b"\xff\xd8" and _jpeg_cut(data):
        raise InvalidSampleError(
            f"{what} file {path!r} is corrupt: truncated (its {len(data)} bytes end before the "
            "JPEG end-of-image marker)"
        )
    reason = ""
    level = cv2.utils.logging.getLogLevel()
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)  # we say it in one line
    try:
        array = mmcv.imfrombytes(data, flag=color_type, backend=backend)
    except Exception as err:  # decoders raise anything from OSError to SyntaxError
        array = None
        reason = f": {type(err).__name__}: {err}"
    finally:
        cv2.utils.logging.setLogLevel(level)
    if array is None or array.size == 0:
        raise InvalidSampleError(
            f"{what} file {path!r} is corrupt or not an image (the {backend} decoder could "
            f"not decode its {len(data)} bytes{reason})"
        )
    return array


def read_image_rgb(path: str, backend_args: Optional[dict] = None) -> np.ndarray:
    """Read any common image as 8-bit RGB (H, W, 3) for inference, decoding it once: gray is
    replicated, alpha composited over white, 16-bit or float rescaled; raises as :func:`read_image`.
    """
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


def read_label(
    path: str, backend: str = "pillow", backend_args: Optional[dict] = None
) -> np.ndarray:
    """Read a label map with its raw values (palette PNGs as indices); as :func:`read_image`."""
    return read_image(path, "unchanged", backend, backend_args, "label").squeeze()


def label_problems(
    raw: np.ndarray,
    num_classes: int,
    ignore_index: int = 255,
    reduce_zero_label: bool = False,
    label_map: Optional[dict] = None,
    image_shape: Optional[Sequence[int]] = None,
) -> tuple[Optional[np.ndarray], list[str]]:
    """(uint8 training labels, or None if there are problems; the problems) of a raw label map:
    valid are ``0 .. num_classes - 1`` and ``ignore_index`` after the dataset's
    ``reduce_zero_label`` and ``label_map`` (as mmseg maps them); its size is ``image_shape``'s."""
    if raw.ndim != 2:
        return None, [f"a label map must have one channel, but its shape is {tuple(raw.shape)}"]
    problems = []
    if image_shape is not None and tuple(raw.shape) != tuple(image_shape[:2]):
        problems.append(
            f"label size {raw.shape[0]}x{raw.shape[1]} (HxW) differs from the image size "
            f"{image_shape[0]}x{image_shape[1]}"
        )
    values = np.unique(raw)
    if values.dtype.kind not in "ui":
        values = values.astype(np.int64)
    lut = np.arange(256, dtype=np.int64)  # raw value (0..255) -> label, as mmseg maps it
    if reduce_zero_label:  # 0 -> 255 (ignore), v -> v - 1, 255 stays 255
        lut = np.where(lut == 0, 255, lut - 1)
        lut[lut == 254] = 255
    source = lut.copy()
    for old, new in (label_map or {}).items():
        lut[source == old] = new
    in_byte = (values >= 0) & (values <= 255)
    mapped = np.where(in_byte, lut[np.clip(values, 0, 255).astype(np.int64)], -1)
    valid = in_byte & (((mapped >= 0) & (mapped < num_classes)) | (mapped == ignore_index))
    bad = values[~valid]
    if bad.size:
        how = " after reduce_zero_label" if reduce_zero_label else ""
        how += " and label_map" if label_map else ""
        problems.append(
            f"label values [{first_items([int(v) for v in bad], 20)}] are outside "
            f"[0, {num_classes}){how} and are not the ignore index {ignore_index}"
        )
    if problems:
        return None, problems
    return lut[raw.astype(np.int64)].astype(np.uint8), []


@TRANSFORMS.register_module()
class CheckedLoadImageFromFile(LoadImageFromFile):
    """``LoadImageFromFile`` (same arguments) that names a missing, unreadable or corrupt file
    (with ``ignore_empty``: None, and mmengine draws another sample, as in mmcv)."""

    def transform(self, results: dict) -> Optional[dict]:
        """Load ``results['img_path']`` into ``results['img']``."""
        if self.file_client_args is not None:  # deprecated mmcv path: keep mmcv's behaviour
            return super().transform(results)
        try:
            img = read_image(
                results["img_path"], self.color_type, self.imdecode_backend, self.backend_args
            )
        except InvalidSampleError:
            if self.ignore_empty:
                return None
            raise
        if self.to_float32:
            img = img.astype(np.float32)
        results["img"] = img
        results["img_shape"] = results["ori_shape"] = img.shape[:2]
        return results


@TRANSFORMS.register_module()
class CheckedLoadAnnotations(LoadAnnotations):
    """``LoadAnnotations`` (``**kwargs``) that checks the label map against its image and
    ``num_classes`` / ``ignore_index`` (:func:`label_problems`). ``num_classes`` None: hamseg's
    tools fill in the decode head's (:func:`~hamseg.datasets.checks.use_checked_loaders`); left
    None (mmseg's own tools) every value 0..255 passes and the rest is checked."""

    def __init__(
        self, num_classes: Optional[int] = None, ignore_index: int = 255, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if num_classes is not None and num_classes < 1:
            raise ValueError(f"num_classes must be >= 1, got {num_classes}")
        self.num_classes = num_classes
        self.ignore_index = ignore_index

    def _load_seg_map(self, results: dict) -> None:
        """Load, check and map ``results['seg_map_path']`` into ``results['gt_seg_map']``; a
        sample without it passes (prediction only: mmseg's ``inference_model`` and
        ``MMSegInferencer`` remove only ``LoadAnnotations`` from a test pipeline)."""
        if "seg_map_path" not in results:
            return
        path = results["seg_map_path"]
        raw = read_label(path, self.imdecode_backend, self.backend_args)
        reduce_zero_label = results.get("reduce_zero_label", False)
        if self.reduce_zero_label is not None and self.reduce_zero_label != reduce_zero_label:
            raise ValueError(
                f"the dataset sets reduce_zero_label={reduce_zero_label} but "
                f"CheckedLoadAnnotations has reduce_zero_label={self.reduce_zero_label}"
            )
        label, problems = label_problems(
            raw,
            256 if self.num_classes is None else self.num_classes,
            self.ignore_index,
            reduce_zero_label,
            results.get("label_map"),
            results.get("ori_shape"),
        )
        if problems:
            image = results.get("img_path")
            raise InvalidSampleError(
                f"label file {path!r}: {'; '.join(problems)}"
                + (f" (image {image!r})" if image else "")
            )
        results["gt_seg_map"] = label
        results["seg_fields"].append("gt_seg_map")
