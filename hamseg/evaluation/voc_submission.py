"""PASCAL VOC 2012 test-server submission (paper Table 4: 85.9 mIoU is a test result):
docs/recipes.md, "VOC 2012 test server"."""

from __future__ import annotations

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

__all__ = ["SUBMISSION_FOLDER", "VOCSubmissionMetric", "pack_submission", "voc_palette"]

#: Where the server looks for the predictions, inside the archive and under ``output_dir``.
SUBMISSION_FOLDER = "results/VOC2012/Segmentation/{task}_test_cls"


def voc_palette(num_colors: int = 256) -> list[int]:
    """The VOC devkit's colour map (VOClabelcolormap.m) as a flat PIL palette: the bits of i,
    three at a time, one to each of r, g, b from the most significant bit down."""
    palette = []
    for index in range(num_colors):
        rgb, value = [0, 0, 0], index
        for shift in range(7, -1, -1):
            for channel in range(3):
                rgb[channel] |= ((value >> channel) & 1) << shift
            value >>= 3
        palette.extend(rgb)
    return palette


def pack_submission(output_dir: str, ids: Sequence[str], task: str, archive: str) -> str:
    """Pack ``<output_dir>/results/.../<id>.png`` of exactly ``ids`` into ``archive`` (relative to
    ``output_dir`` unless absolute); FileNotFoundError names the first missing prediction."""
    folder = SUBMISSION_FOLDER.format(task=task)
    path = archive if osp.isabs(archive) else osp.join(output_dir, archive)
    with tarfile.open(f"{path}.part", "w:gz") as tar:
        for image_id in ids:
            png = osp.join(output_dir, folder, f"{image_id}.png")
            if not osp.isfile(png):
                raise FileNotFoundError(f"prediction {png} is missing: the test run is incomplete")
            tar.add(png, arcname=f"{folder}/{image_id}.png")
    os.replace(f"{path}.part", path)
    return path


@METRICS.register_module()
class VOCSubmissionMetric(IoUMetric):
    """Write the VOC 2012 test-server submission (and, with labels, evaluate as IoUMetric).

    Every rank writes ``<output_dir>/results/VOC2012/Segmentation/<task>_test_cls/<id>.png``
    (indexed, VOC palette, original size); rank 0 packs them into ``<output_dir>/<archive>``.

    Args:
        output_dir: Root of the submission (``tools/test.py --out`` sets it too).
        format_only: True for the label-free test split; False also computes IoU from labels.
        task: 'comp6' (trained with data beyond VOC, such as SBD: the recipes) or 'comp5'.
        archive: Archive name (relative to ``output_dir``) or path; None: no archive.
        **kwargs: ``IoUMetric`` arguments (mmseg's ``keep_results`` is accepted and ignored).
    """

    TASKS = ("comp5", "comp6")

    def __init__(
        self,
        output_dir: Optional[str] = None,
        format_only: bool = True,
        task: str = "comp6",
        archive: Optional[str] = "results.tar.gz",
        **kwargs: Any,
    ) -> None:
        if not output_dir:
            raise ValueError(
                "VOCSubmissionMetric needs output_dir (test_evaluator.output_dir, --out)"
            )
        if task not in self.TASKS:
            raise ValueError(f"task must be one of {self.TASKS}, got {task!r}")
        # IoUMetric would write plain PNGs into output_dir itself: it gets none.
        super().__init__(output_dir=None, format_only=format_only, **kwargs)
        self.output_dir, self.task, self.archive = output_dir, task, archive
        self.folder = osp.join(output_dir, SUBMISSION_FOLDER.format(task=task))

    def process(self, data_batch: Any, data_samples: Sequence[dict]) -> None:
        """Write each prediction; keep its id (and, with labels, the IoU areas) for rank 0."""
        os.makedirs(self.folder, exist_ok=True)  # every rank: rank 0 may not have made it yet
        for sample in data_samples:
            pred = sample["pred_sem_seg"]["data"].squeeze(0)  # (H, W)
            image_id = osp.splitext(osp.basename(sample["img_path"]))[0]
            ori_shape = tuple(sample.get("ori_shape", pred.shape))[:2]
            if tuple(pred.shape) != ori_shape:
                raise ValueError(
                    f"prediction of {image_id} is {tuple(pred.shape)}, not the image's size "
                    f"{ori_shape}: the server needs predictions at the original size"
                )
            image = Image.fromarray(pred.cpu().numpy().astype(np.uint8))  # mode "L" ...
            image.putpalette(voc_palette())  # ... becomes "P", values kept
            path = osp.join(self.folder, f"{image_id}.png")
            image.save(f"{path}.part{get_rank()}", format="PNG")  # atomic: the sampler's padded
            os.replace(f"{path}.part{get_rank()}", path)  # duplicates meet on two ranks
            areas = None
            if not self.format_only:
                label = sample["gt_sem_seg"]["data"].squeeze(0).to(pred)
                num_classes = len(self.dataset_meta["classes"])
                areas = self.intersect_and_union(pred, label, num_classes, self.ignore_index)
            self.results.append((image_id, areas))

    def compute_metrics(self, results: list) -> dict[str, float]:
        """Pack the archive (rank 0, all ranks' PNGs written) and compute IoU if not format_only."""
        ids = [image_id for image_id, _ in results]
        metrics = {} if self.format_only else super().compute_metrics([a for _, a in results])
        print_log(f"{len(ids)} predictions in the VOC server format in {self.folder}", "current")
        if self.archive is not None:
            path = pack_submission(self.output_dir, ids, self.task, self.archive)
            print_log(
                f"VOC submission archive: {osp.abspath(path)}: upload it to the PASCAL VOC "
                f"evaluation server as segmentation {self.task} (docs/recipes.md)",
                "current",
            )
        return metrics
