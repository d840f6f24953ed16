"""Colour overlays of predicted label maps, with a legend of the classes (PNG-ready RGB)."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

__all__ = ["draw_overlay"]


def draw_overlay(
    img: np.ndarray,
    label: np.ndarray,
    classes: Sequence[str],
    palette: Sequence[Sequence[int]],
    opacity: float = 0.5,
    legend: str = "present",
) -> np.ndarray:
    """Blend the label colours over the image and add a legend panel on the right.

    Args:
        img: RGB uint8 (H, W, 3).
        label: Class indices (H, W); values outside the palette are left unpainted.
        classes: Class names.
        palette: RGB colour of each class.
        opacity: Weight of the label colours.
        legend: 'present' (classes in ``label``, largest first) or 'all'.

    Returns:
        RGB uint8 image (max(H, legend height), W + legend width, 3).
    """
    h, w = label.shape
    colours = np.asarray(palette, np.float32)
    valid = label < len(colours)
    out = img.astype(np.float32)
    painted = colours[np.where(valid, label, 0)]
    out[valid] = (1 - opacity) * out[valid] + opacity * painted[valid]
    out = np.clip(np.round(out), 0, 255).astype(np.uint8)

    if legend == "all":
        shown = list(range(len(classes)))
    else:
        ids, counts = np.unique(label[valid], return_counts=True)
        shown = [int(i) for i in ids[np.argsort(-counts, kind="stable")]]
    font, scale, thick = cv2.FONT_HERSHEY_SIMPLEX, 0.45, 1
    row = 20
    text_w = max([cv2.getTextSize(str(classes[i]), font, scale, thick)[0][0] for i in shown] + [60])
    panel_w = 8 + 14 + 6 + text_w + 8
    panel_h = max(h, 8 + row * max(1, len(shown)) + 4)
    panel = np.full((panel_h, panel_w, 3), 255, np.uint8)
    if not shown:
        cv2.putText(panel, "(no class)", (8, 22), font, scale, (0, 0, 0), thick, cv2.LINE_AA)
    for k, i in enumerate(shown):
        y = 8 + k * row
        colour = tuple(int(c) for c in palette[i])
        cv2.rectangle(panel, (8, y), (8 + 14, y + 14), colour, thickness=-1)
        cv2.rectangle(panel, (8, y), (8 + 14, y + 14), (0, 0, 0), thickness=1)
        cv2.putText(
            panel, str(classes[i]), (28, y + 12), font, scale, (0, 0, 0), thick, cv2.LINE_AA
        )
    canvas = np.full((panel_h, w + panel_w, 3), 255, np.uint8)
    canvas[:h, :w] = out
    canvas[:, w:] = panel
    return canvas
