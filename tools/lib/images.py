"""Segment image files (``tools/infer.py``): files, folders and ``.txt`` lists in,
``<name>_overlay.png`` (with a legend) out; an input that is not a complete image is named in one
line and skipped (docs/demo.md)."""

from __future__ import annotations

import os
import os.path as osp
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import cv2
import numpy as np
from torch import nn

from hamseg.apis.inference import class_info, predict_label
from hamseg.datasets.loading import InvalidSampleError, read_image_rgb

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm")


def gather_inputs(inputs: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Expand files, folders (recursive, sorted) and ``.txt`` lists (one path a line, ``#``
    comments; relative to the working directory, else to the list) into image paths, each once;
    set aside a missing listed path or a ``.txt`` that is no list. Returns (paths, [(path, why)]).

    Raises:
        FileNotFoundError: An input given directly (not listed) does not exist.
    """
    paths: list[str] = []
    skipped: list[tuple[str, str]] = []
    for item in inputs:
        if osp.isdir(item):
            found = [osp.join(root, f) for root, _, files in os.walk(item) for f in files]
            paths += sorted(f for f in found if f.lower().endswith(IMAGE_EXTENSIONS))
        elif item.lower().endswith(".txt") and osp.isfile(item):
            listed, problem = _read_list(item)
            if problem:
                skipped.append((item, f"{item}: {problem}"))
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
    """(line, resolved path) of each entry of a ``.txt`` list, or [] and why it is not one."""
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
        shown = entries[0][0] if len(entries[0][0]) <= 40 else entries[0][0][:37] + "..."
        return [], (
            "a .txt input is a list of image paths, one a line, but no line of it names an "
            f"image or an existing file (line 1: {shown!r})"
        )
    return entries, ""


def collect_inputs(inputs: Sequence[str]) -> list[str]:
    """:func:`gather_inputs`, strictly: anything set aside raises ``FileNotFoundError``."""
    paths, skipped = gather_inputs(inputs)
    if skipped:
        raise FileNotFoundError(skipped[0][1])
    return paths


def draw_overlay(
    img: np.ndarray,
    label: np.ndarray,
    classes: Sequence[str],
    palette: Sequence[Sequence[int]],
    opacity: float = 0.5,
    legend: str = "present",
) -> np.ndarray:
    """Blend the class colours (``opacity``) over an RGB uint8 image (labels outside the palette
    unpainted) and add a legend on the right of the classes 'present' (largest first) or 'all'."""
    h, w = label.shape
    colours = np.asarray(palette, np.float32)
    valid = label < len(colours)
    out = img.astype(np.float32)
    out[valid] = (1 - opacity) * out[valid] + opacity * colours[label[valid]]
    out = np.clip(np.round(out), 0, 255).astype(np.uint8)
    ids, counts = np.unique(label[valid], return_counts=True)
    shown = [int(i) for i in ids[np.argsort(-counts, kind="stable")]]
    shown = list(range(len(classes))) if legend == "all" else shown
    font = cv2.FONT_HERSHEY_SIMPLEX
    scale = 0.45
    row = 20
    text_w = max([cv2.getTextSize(str(classes[i]), font, scale, 1)[0][0] for i in shown] + [60])
    panel_h = max(h, 8 + row * max(1, len(shown)) + 4)
    canvas = np.full((panel_h, w + 36 + text_w, 3), 255, np.uint8)
    canvas[:h, :w] = out
    text = lambda s, at: cv2.putText(canvas, s, at, font, scale, (0, 0, 0), 1, cv2.LINE_AA)
    if not shown:
        text("(no class)", (w + 8, 22))
    for k, i in enumerate(shown):
        x = w + 8
        y = 8 + k * row
        cv2.rectangle(canvas, (x, y), (x + 14, y + 14), tuple(int(c) for c in palette[i]), -1)
        cv2.rectangle(canvas, (x, y), (x + 14, y + 14), (0, 0, 0), 1)
        text(str(classes[i]), (x + 20, y + 12))
    return canvas


def output_name(path: str, inputs_root: Optional[str]) -> str:
    """Output stem: the path relative to its input folder (separators -> '__'), else the name."""
    rel = osp.relpath(path, inputs_root) if inputs_root else osp.basename(path)
    return osp.splitext(rel)[0].replace(os.sep, "__")


@dataclass
class InferenceReport:
    """What :func:`segment_images` did: overlays written, inputs skipped (path, reason)."""

    written: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


def segment_images(
    model: nn.Module,
    paths: Sequence[str],
    out_dir: str,
    inputs_root: Optional[str] = None,
    opacity: float = 0.5,
    legend: str = "present",
    save_label: bool = False,
    progress: bool = True,
    on_failure: Optional[Callable[[str, str], Any]] = None,
) -> InferenceReport:
    """Write ``<name>_overlay.png`` (:func:`draw_overlay`; with ``save_label`` also
    ``<name>_label.png``) of each image into ``out_dir``, keeping the sub-folders below
    ``inputs_root``; a tqdm bar for more than one image (``progress``); an input that is not a
    complete image is skipped, ``on_failure(path, message)`` called at once."""
    from tqdm import tqdm

    classes, palette = class_info(model)
    report = InferenceReport()
    os.makedirs(out_dir, exist_ok=True)
    for path in tqdm(paths, desc="infer", unit="img", disable=not progress or len(paths) < 2):
        try:
            img = read_image_rgb(path)
        except InvalidSampleError as err:
            report.failed.append((path, str(err)))
            if on_failure is not None:
                on_failure(path, str(err))
            continue
        label = predict_label(model, img)
        stem = osp.join(out_dir, output_name(path, inputs_root))
        canvas = draw_overlay(img, label, classes, palette, opacity, legend)
        cv2.imwrite(f"{stem}_overlay.png", cv2.cvtColor(canvas, cv2.COLOR_RGB2BGR))
        if save_label:
            cv2.imwrite(f"{stem}_label.png", label.astype(np.uint8))
        report.written.append(f"{stem}_overlay.png")
    return report
