"""PASCAL Context: the 60-class and the 59-class mIoU of one 60-class model from one test run."""

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from mmseg.evaluation import IoUMetric
from mmseg.registry import METRICS


@METRICS.register_module()
class ContextIoUMetric(IoUMetric):
    """``IoUMetric`` over all classes, plus the same metrics over the object classes, suffixed
    with their number (``mIoU59``: Table 5's protocol): pixels labelled ``background_index`` are
    ignored, the others predicted by the argmax of ``seg_logits`` over the object classes."""

    def __init__(self, background_index: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.background_index = background_index

    def process(self, data_batch: Any, data_samples: Sequence[dict]) -> None:
        """The areas of the all-class and of the object-class evaluation of each sample."""
        num_classes, bg = len(self.dataset_meta["classes"]), self.background_index
        for sample in data_samples:
            scores = sample["seg_logits"]["data"]  # (C, H, W)
            if scores.shape[0] != num_classes:
                raise ValueError(
                    f"ContextIoUMetric: the model predicts {scores.shape[0]} classes, the dataset "
                    f"has {num_classes}: it needs a model with the background class"
                )
            pred = sample["pred_sem_seg"]["data"].squeeze(0)  # (H, W)
            label = sample["gt_sem_seg"]["data"].squeeze(0).to(pred)
            keep = [c for c in range(num_classes) if c != bg]  # the object classes
            ignored = (label == bg) | (label == self.ignore_index)
            shifted = torch.where(ignored, self.ignore_index, label - (label > bg).long())
            every = self.intersect_and_union(pred, label, num_classes, self.ignore_index)
            objects = self.intersect_and_union(
                scores[keep].argmax(dim=0), shifted, num_classes - 1, self.ignore_index
            )  # (C - 1, H, W) -> (H, W)
            self.results.append((every, objects))

    def compute_metrics(self, results: list) -> dict[str, float]:
        """mmseg's metrics over all classes (logged), then the object-class ones."""
        metrics = super().compute_metrics([every for every, _ in results])
        totals = [sum(parts) for parts in zip(*(objects for _, objects in results))]
        per_class = self.total_area_to_metrics(*totals, self.metrics, self.nan_to_num, self.beta)
        suffix = str(len(self.dataset_meta["classes"]) - 1)
        for key, value in per_class.items():
            name = key if key == "aAcc" else f"m{key}"
            metrics[f"{name}{suffix}"] = np.round(np.nanmean(value) * 100, 2)
        return metrics
