"""Image inputs and overlays (``tools/infer.py``): files, folders and ``.txt`` lists in, mmseg's
overlays out; an input that is not a complete image is named in one line and skipped."""

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

from hamseg.datasets.loading import InvalidSampleError, read_image_rgb

from .inference import class_info

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm")


def _listed(item: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The images a ``.txt`` list names (one a line, ``#`` comments; relative to the working
    directory, else to the list) and (path, why) of each entry, or the list, set aside."""
    try:
        with open(item, encoding="utf-8") as f:
            lines = [line.strip() for line in f if line.strip() and line[0] != "#"]
    except (UnicodeDecodeError, OSError) as err:
        return [], [(item, f"{item}: a .txt input lists image paths; it is not text ({err})")]
    paths = [p if osp.exists(p) else osp.join(osp.dirname(item), p) for p in lines]
    if not any(p.lower().endswith(IMAGE_EXTENSIONS) or osp.isfile(p) for p in paths):
        return [], [(item, f"{item}: a .txt input lists image paths; it names none")]
    missing = [(p, f"image listed in {item} not found: {line}") for p, line in zip(paths, lines)]
    return [p for p in paths if osp.isfile(p)], [m for m in missing if not osp.isfile(m[0])]


def gather_inputs(inputs: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Image paths of files, folders (recursive, sorted) and ``.txt`` lists, each once, and
    (path, why) of what was set aside; ``FileNotFoundError`` for a missing input."""
    paths, skipped = [], []
    for item in inputs:
        if osp.isdir(item):
            found = [osp.join(root, f) for root, _, files in os.walk(item) for f in files]
            paths += sorted(f for f in found if f.lower().endswith(IMAGE_EXTENSIONS))
        elif item.lower().endswith(".txt") and osp.isfile(item):
            listed, bad = _listed(item)
            paths, skipped = paths + listed, skipped + bad
        elif osp.isfile(item):
            paths.append(item)
        else:
            raise FileNotFoundError(f"input not found: {item}")
    unique = {}
    for path in paths:
        unique.setdefault(osp.realpath(path), path)
    return list(unique.values()), skipped


def segment_images(
    model: nn.Module,
    paths: Sequence[str],
    out_dir: str,
    inputs_root: Optional[str] = None,
    opacity: float = 0.5,
    with_labels: bool = False,
    save_label: bool = False,
) -> Iterator[tuple[str, Optional[str]]]:
    """Write each image's overlay, drawn by mmseg's ``SegLocalVisualizer`` (class names on their
    regions with ``with_labels``), as ``<name>_overlay.png`` into ``out_dir`` (``save_label``:
    also the label map ``<name>_label.png``), ``<name>`` the path below ``inputs_root`` with '__'
    for separators; yield (path, None) once written, (path, why) for an input that is no
    complete image."""
    drawer = SegLocalVisualizer.get_instance(f"hamseg.images.{id(model)}", alpha=opacity)
    drawer.alpha, drawer.dataset_meta = (
        opacity,
        dict(zip(("classes", "palette"), class_info(model))),
    )
    os.makedirs(out_dir, exist_ok=True)
    for path in paths:
        try:
            rgb = read_image_rgb(path)
        except InvalidSampleError as err:
            yield path, str(err)
            continue
        result = inference_model(model, np.ascontiguousarray(rgb[:, :, ::-1]))  # mmseg: BGR
        name = osp.relpath(path, inputs_root) if inputs_root else osp.basename(path)
        stem = osp.join(out_dir, osp.splitext(name)[0].replace(os.sep, "__"))
        drawer.add_datasample(
            stem,
            rgb,
            result,
            draw_gt=False,
            with_labels=with_labels,
            out_file=f"{stem}_overlay.png",
        )
        if save_label:
            cv2.imwrite(
                f"{stem}_label.png", result.pred_sem_seg.data[0].cpu().numpy().astype(np.uint8)
            )
        yield path, None
