"""PASCAL VOC 2012 test-server submission (paper Table 4: 85.9 mIoU is a test-server result)."""

import os
import os.path as osp
import tarfile
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
from mmengine.dist import get_rank
from mmengine.logging import print_log
from mmseg.evaluation import IoUMetric
from mmseg.registry import METRICS
from PIL import Image

#: Where the server looks for the predictions, inside the archive and under ``output_dir``.
SUBMISSION_FOLDER = "results/VOC2012/Segmentation/{task}_test_cls"


def voc_palette() -> list[int]:
    """The VOC devkit's 256 colours (VOClabelcolormap.m) as a flat PIL palette."""
    index, step, channel = np.arange(256)[:, None, None], np.arange(8)[:, None], np.arange(3)
    bits = (index >> (3 * step + channel)) & 1  # (256, 8, 3): bit 3j + c of i ...
    return (bits << (7 - step)).sum(axis=1).flatten().tolist()  # ... is bit 7 - j of colour c


@METRICS.register_module()
class VOCSubmissionMetric(IoUMetric):
    """Write the VOC 2012 test-server submission (and, with labels, evaluate as IoUMetric).

    Every rank writes ``<output_dir>/results/VOC2012/Segmentation/<task>_test_cls/<id>.png``
    (indexed, VOC palette, original size); rank 0 packs them into ``<output_dir>/<archive>``.

    Args:
        output_dir: Root of the submission (``tools/test.py --out`` sets it too).
        format_only: True for the label-free test split; False also computes IoU from labels.
        task: 'comp6' (trained on data beyond VOC, as the recipes) or 'comp5'.
        archive: Archive name (relative to ``output_dir``) or path; None: no archive.
        **kwargs: ``IoUMetric`` arguments.
    """

    def __init__(
        self,
        output_dir: Optional[str] = None,
        format_only: bool = True,
        task: str = "comp6",
        archive: Optional[str] = "results.tar.gz",
        **kwargs: Any,
    ) -> None:
        if not output_dir:
            raise ValueError("VOCSubmissionMetric needs output_dir (test_evaluator.output_dir)")
        # IoUMetric would write plain PNGs into output_dir itself: it gets none.
        super().__init__(output_dir=None, format_only=format_only, **kwargs)
        self.output_dir, self.task, self.archive = output_dir, task, archive
        self.folder = SUBMISSION_FOLDER.format(task=task)

    def process(self, data_batch: Any, data_samples: Sequence[dict]) -> None:
        """Write each prediction; keep its id (and, with labels, the IoU areas) for rank 0."""
        folder = osp.join(self.output_dir, self.folder)
        os.makedirs(folder, exist_ok=True)
        for sample in data_samples:
            pred = sample["pred_sem_seg"]["data"].squeeze(0)  # (H, W)
            image_id = osp.splitext(osp.basename(sample["img_path"]))[0]
            if tuple(pred.shape) != tuple(sample["ori_shape"]):
                raise ValueError(
                    f"prediction of {image_id} is {tuple(pred.shape)}, not the image's size "
                    f"{tuple(sample['ori_shape'])}: the server needs the original size"
                )
            image = Image.fromarray(pred.cpu().numpy().astype(np.uint8))
            image.putpalette(voc_palette())  # mode "P", values kept
            path = osp.join(folder, f"{image_id}.png")
            image.save(f"{path}.part{get_rank()}", format="PNG")  # padded duplicates of the
            os.replace(f"{path}.part{get_rank()}", path)  # sampler meet on two ranks
            areas = None
            if not self.format_only:
                label = sample["gt_sem_seg"]["data"].squeeze(0).to(pred)
                num_classes = len(self.dataset_meta["classes"])
                areas = self.intersect_and_union(pred, label, num_classes, self.ignore_index)
            self.results.append((image_id, areas))

    def compute_metrics(self, results: list) -> dict[str, float]:
        """Pack exactly the predicted ids (rank 0, all ranks' PNGs written); IoU with labels."""
        metrics = {} if self.format_only else super().compute_metrics([a for _, a in results])
        if self.archive is None:
            return metrics
        path = osp.join(self.output_dir, self.archive)  # an absolute archive stays itself
        with tarfile.open(path, "w:gz") as tar:
            for image_id, _ in results:
                name = f"{self.folder}/{image_id}.png"
                if not osp.isfile(osp.join(self.output_dir, name)):
                    raise FileNotFoundError(f"prediction {name} is missing: the run is incomplete")
                tar.add(osp.join(self.output_dir, name), arcname=name)
        print_log(f"VOC submission archive: {osp.abspath(path)} (comp: {self.task})", "current")
        return metrics
