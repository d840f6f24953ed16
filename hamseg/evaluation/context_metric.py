"""PASCAL Context: the 60-class and the 59-class mIoU of one 60-class model from one test run
(the paper's Table 5 is a 59-class number: docs/evaluation.md, "PASCAL Context")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from mmseg.evaluation import IoUMetric
from mmseg.registry import METRICS
from torch import Tensor

__all__ = ["ContextIoUMetric", "objects_only"]


def objects_only(
    scores: Tensor, label: Tensor, background_index: int, ignore_index: int
) -> tuple[Tensor, Tensor]:
    """Prediction and label (H, W) without the background class: the argmax of the scores
    (C, H, W) over the C - 1 object classes, and the label with the classes above background
    shifted down by one and background pixels set to ``ignore_index``."""
    keep = [c for c in range(scores.shape[0]) if c != background_index]
    pred = scores[keep].argmax(dim=0)  # (C - 1, H, W) -> (H, W)
    shifted = torch.where(label > background_index, label - 1, label)
    is_ignored = (label == background_index) | (label == ignore_index)
    return pred, torch.where(is_ignored, torch.full_like(label, ignore_index), shifted)


@METRICS.register_module()
class ContextIoUMetric(IoUMetric):
    """``IoUMetric`` (``aAcc``, ``mIoU``, ... over all classes) plus the same metrics without
    the class ``background_index`` (:func:`objects_only`) from the samples' ``seg_logits``,
    named with the number of object classes appended (``mIoU59`` for Context)."""

    def __init__(self, background_index: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.format_only:
            raise ValueError("ContextIoUMetric needs labels: format_only=True is not supported")
        self.background_index = background_index

    def process(self, data_batch: Any, data_samples: Sequence[dict]) -> None:
        """Areas of the all-class and of the object-class evaluation of each sample."""
        num_classes = len(self.dataset_meta["classes"])
        for sample in data_samples:
            scores = sample["seg_logits"]["data"]  # (C, H, W)
            if scores.shape[0] != num_classes:
                raise ValueError(
                    f"the model predicts {scores.shape[0]} classes but the dataset has "
                    f"{num_classes}: ContextIoUMetric is for a model with a background class"
                )
            pred = sample["pred_sem_seg"]["data"].squeeze(0)  # (H, W)
            label = sample["gt_sem_seg"]["data"].squeeze(0).to(pred)
            objects = objects_only(scores, label, self.background_index, self.ignore_index)
            every = self.intersect_and_union(pred, label, num_classes, self.ignore_index)
            self.results.append(
                (every, self.intersect_and_union(*objects, num_classes - 1, self.ignore_index))
            )

    def compute_metrics(self, results: list) -> dict[str, float]:
        """mmseg's metrics over all classes (logged), then the object-class ones (suffix C - 1)."""
        metrics = super().compute_metrics([every for every, _ in results])
        totals = [sum(parts) for parts in zip(*(objects for _, objects in results))]
        per_class = self.total_area_to_metrics(*totals, self.metrics, self.nan_to_num, self.beta)
        suffix = str(len(self.dataset_meta["classes"]) - 1)
        for key, value in per_class.items():
            name = key if key == "aAcc" else f"m{key}"
            metrics[f"{name}{suffix}"] = np.round(np.nanmean(value) * 100, 2)
        return metrics
