"""Image inputs and overlays (``tools/infer.py``): files and folders in, mmseg's overlays out; an
input that is not a complete image is named in one line and skipped."""

from __future__ import annotations

import os
import os.path as osp
from collections.abc import Iterator, Sequence
from typing import Optional

import cv2
import numpy as np
from mmseg.apis import inference_model
from mmseg.visualization import SegLocalVisualizer
from torch import nn

from hamseg.datasets.loading import InvalidSampleError, read_image

from .inference import class_info

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm")


def gather_inputs(inputs: Sequence[str]) -> list[str]:
    """Image paths of files and folders (recursive, sorted), each once (its first mention).

    Raises:
        FileNotFoundError: An input does not exist.
    """
    paths = []
    for item in inputs:
        if osp.isdir(item):
            found = [osp.join(root, f) for root, _, files in os.walk(item) for f in files]
            paths += sorted(f for f in found if f.lower().endswith(IMAGE_EXTENSIONS))
        elif osp.isfile(item):
            paths.append(item)
        else:
            raise FileNotFoundError(f"input not found: {item}")
    unique = {}
    for path in paths:
        unique.setdefault(osp.realpath(path), path)
    return list(unique.values())


def segment_images(
    model: nn.Module,
    paths: Sequence[str],
    out_dir: str,
    inputs_root: Optional[str] = None,
    opacity: float = 0.5,
    with_labels: bool = False,
    save_label: bool = False,
) -> Iterator[tuple[str, Optional[str]]]:
    """Write each image's overlay by mmseg's visualizer (``with_labels``: class names on the
    regions) to ``<out_dir>/<name>_overlay.png`` (``save_label``: the label map too), ``<name>``
    its path below ``inputs_root``, '/' as '__'; yield (path, None) or (path, why skipped)."""
    drawer = SegLocalVisualizer(name=f"hamseg.images.{id(model)}", alpha=opacity)
    drawer.dataset_meta = dict(zip(("classes", "palette"), class_info(model)))
    os.makedirs(out_dir, exist_ok=True)
    for path in paths:
        try:
            rgb = read_image(path)[:, :, ::-1]  # as mmseg's LoadImageFromFile reads it
        except InvalidSampleError as err:
            yield path, str(err)
            continue
        result = inference_model(model, np.ascontiguousarray(rgb[:, :, ::-1]))  # mmseg: BGR
        name = osp.relpath(path, inputs_root) if inputs_root else osp.basename(path)
        stem = osp.join(out_dir, osp.splitext(name)[0].replace(os.sep, "__"))
        overlay, label = f"{stem}_overlay.png", result.pred_sem_seg.data[0].cpu().numpy()
        drawer.add_datasample(stem, rgb, result, False, out_file=overlay, with_labels=with_labels)
        if save_label:
            cv2.imwrite(f"{stem}_label.png", label.astype(np.uint8))
        yield path, None
