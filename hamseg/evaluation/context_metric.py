"""PASCAL Context: the 60-class and the 59-class mIoU of one model from one test run.

The paper's Table 5 (55.2 mIoU on PASCAL Context val) does not say which of the two Context
benchmarks it is: 60 classes (59 objects + background, background is a class) or 59 classes
(background pixels ignored). :class:`ContextIoUMetric` reports both for a 60-class model:

- ``mIoU`` (and ``aAcc``, ``mAcc``): mmseg's ``IoUMetric`` over all 60 classes, unchanged.
- ``mIoU59`` (and ``aAcc59``, ``mAcc59``): every pixel labelled background (or ignore) is left
  out, and the prediction at the other pixels is the argmax of the model's scores over the 59
  object classes only (the background score is dropped, so a pixel the 60-class prediction calls
  background counts as the best object class instead); IoU, averaged over the 59 object classes.
  This is the 59-class benchmark's pixel set and label space, answered by the 60-class model.

The scores are the sample's ``seg_logits`` at the original image size: the logits of
single-scale inference (whole or slide), or the merged scores of ``--tta``
(:class:`hamseg.engine.tta.HamSegTTAModel`: summed logits or mean probabilities).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from mmengine.logging import print_log
from mmseg.evaluation import IoUMetric
from mmseg.registry import METRICS
from torch import Tensor

__all__ = ["ContextIoUMetric", "objects_only"]


def objects_only(
    scores: Tensor, label: Tensor, background_index: int, ignore_index: int
) -> tuple[Tensor, Tensor]:
    """Prediction and label in the label space without the background class.

    Args:
        scores: Class scores (C, H, W) of a model with a background class.
        label: Labels (H, W) in [0, C) or ``ignore_index``.
        background_index: The background class.
        ignore_index: Label value of ignored pixels.

    Returns:
        ``(pred, label)``, both (H, W) in [0, C - 1): the argmax over the C - 1 object classes,
        and the label with classes above the background shifted down by one and background
        pixels set to ``ignore_index``.
    """
    num_classes = scores.shape[0]
    keep = [c for c in range(num_classes) if c != background_index]
    pred = scores[keep].argmax(dim=0)  # (C - 1, H, W) -> (H, W)
    shifted = torch.where(label > background_index, label - 1, label)
    is_ignored = (label == background_index) | (label == ignore_index)
    return pred, torch.where(is_ignored, torch.full_like(label, ignore_index), shifted)


@METRICS.register_module()
class ContextIoUMetric(IoUMetric):
    """``IoUMetric`` plus the metrics without the background class, from the same predictions.

    Args:
        background_index: Index of the background class (0 in mmseg's PASCAL Context).
        **kwargs: Passed to ``IoUMetric`` (``iou_metrics``, ``ignore_index``, ...).

    Metric names: the ``IoUMetric`` ones (``aAcc``, ``mIoU``, ``mAcc``, ...) over all classes,
    and the same names with the number of object classes appended (``aAcc59``, ``mIoU59``,
    ``mAcc59`` for Context) for the background-free evaluation described in the module doc.
    """

    def __init__(self, background_index: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.format_only:
            raise ValueError("ContextIoUMetric needs labels: format_only=True is not supported")
        self.background_index = background_index

    def process(self, data_batch: Any, data_samples: Sequence[dict]) -> None:
        """Areas of the all-class and of the object-class evaluation of each sample."""
        num_classes = len(self.dataset_meta["classes"])
        for sample in data_samples:
            if "seg_logits" not in sample:
                raise KeyError(
                    "ContextIoUMetric needs the samples' seg_logits (mmseg predicts them)"
                )
            scores = sample["seg_logits"]["data"]  # (C, H, W)
            if scores.shape[0] != num_classes:
                raise ValueError(
                    f"the model predicts {scores.shape[0]} classes but the dataset has "
                    f"{num_classes}: ContextIoUMetric is for a model with a background class"
                )
            pred = sample["pred_sem_seg"]["data"].squeeze(0)  # (H, W)
            label = sample["gt_sem_seg"]["data"].squeeze(0).to(pred)
            pred_obj, label_obj = objects_only(
                scores, label, self.background_index, self.ignore_index
            )
            self.results.append(
                (
                    self.intersect_and_union(pred, label, num_classes, self.ignore_index),
                    self.intersect_and_union(
                        pred_obj, label_obj, num_classes - 1, self.ignore_index
                    ),
                )
            )

    def compute_metrics(self, results: list) -> dict[str, float]:
        """mmseg's metrics over all classes, then the object-class ones (suffix C - 1)."""
        metrics = super().compute_metrics([every for every, _ in results])
        totals = [sum(parts) for parts in zip(*(objects for _, objects in results))]
        per_class = self.total_area_to_metrics(
            *totals, self.metrics, self.nan_to_num, self.beta
        )  # fmt: skip
        suffix = str(len(self.dataset_meta["classes"]) - 1)
        for key, value in per_class.items():
            name = key if key == "aAcc" else f"m{key}"
            metrics[f"{name}{suffix}"] = np.round(np.nanmean(value) * 100, 2)
        print_log(
            f"without background ({suffix} object classes; background pixels ignored, argmax "
            f"over the object classes): "
            + ", ".join(f"{k}={v}" for k, v in metrics.items() if k.endswith(suffix)),
            logger="current",
        )
        return metrics
