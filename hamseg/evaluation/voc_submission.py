"""PASCAL VOC 2012 test-server submission: palette PNGs in the comp6 folder, packed as tar.gz.

The paper's headline VOC number (85.9 mIoU, Table 4) is a *test* result: the 1,456 test images
have no public labels, so it only exists as a submission to the VOC evaluation server. The
server takes an archive holding ``results/VOC2012/Segmentation/comp6_test_cls/<image id>.png``:
one indexed ("P" mode) PNG per image, with the VOC colour map, at the image's original size,
pixel values the class indices 0..20. ``comp6`` is the segmentation competition with training
data beyond VOC (the recipes train on SBD too); ``comp5`` would be VOC data only.

mmseg's ``IoUMetric(format_only=True, output_dir=...)`` is the prediction-only mechanism this
builds on: every rank writes its predictions in ``process`` while testing. What it lacks for the
server, :class:`VOCSubmissionMetric` adds: the VOC palette, the comp6 folder layout, an atomic
write (a padded duplicate sample of the distributed sampler may be written by two ranks), and the
archive, packed in ``compute_metrics``, which mmengine calls on rank 0 only after the results of
all ranks are collected (so after every rank has written its PNGs).
"""

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
    """The VOC devkit's colour map (VOClabelcolormap.m) as a flat PIL palette [r, g, b, ...].

    Colour of index i: the bits of i, three at a time (one to each of r, g, b), are written from
    the most significant bit of each channel downwards. Index 0 is black, 255 (void) is
    (224, 224, 192); the first 21 colours are mmseg's ``PascalVOCDataset`` palette.

    Args:
        num_colors: Number of palette entries (256 for a full PNG palette).

    Returns:
        ``3 * num_colors`` integers in [0, 255].
    """
    palette = []
    for index in range(num_colors):
        rgb, value = [0, 0, 0], index
        for shift in range(7, -1, -1):
            for channel in range(3):
                rgb[channel] |= ((value >> channel) & 1) << shift
            value >>= 3
        palette.extend(rgb)
    return palette


def write_palette_png(label: np.ndarray, path: str) -> None:
    """Write class indices (H, W) as an indexed PNG with the VOC palette, atomically."""
    image = Image.fromarray(label.astype(np.uint8))  # mode "L" ...
    image.putpalette(voc_palette())  # ... becomes "P", values kept
    partial = f"{path}.part{get_rank()}"
    image.save(partial, format="PNG")
    os.replace(partial, path)


def pack_submission(output_dir: str, ids: Sequence[str], task: str, archive: str) -> str:
    """Pack ``<output_dir>/results/.../<id>.png`` of ``ids`` into a tar.gz for the server.

    Only the listed ids go into the archive (PNGs left in the folder by an earlier run do not).

    Args:
        output_dir: Root holding the ``results/`` tree.
        ids: Image ids, in the order of the test split.
        task: 'comp6' (extra training data) or 'comp5' (VOC data only).
        archive: Archive file name, relative to ``output_dir`` unless absolute.

    Returns:
        The archive's path.

    Raises:
        FileNotFoundError: A prediction of a listed id is missing (naming the first).
    """
    folder = SUBMISSION_FOLDER.format(task=task)
    path = archive if osp.isabs(archive) else osp.join(output_dir, archive)
    partial = f"{path}.part"
    with tarfile.open(partial, "w:gz") as tar:
        for image_id in ids:
            png = osp.join(output_dir, folder, f"{image_id}.png")
            if not osp.isfile(png):
                raise FileNotFoundError(f"prediction {png} is missing: the test run is incomplete")
            tar.add(png, arcname=f"{folder}/{image_id}.png")
    os.replace(partial, path)
    return path


@METRICS.register_module()
class VOCSubmissionMetric(IoUMetric):
    """Write the VOC 2012 test-server submission (and, with labels, evaluate as IoUMetric).

    Every rank writes ``<output_dir>/results/VOC2012/Segmentation/<task>_test_cls/<id>.png``
    for each image it predicts (indexed PNG, VOC palette, original size, values 0..20); rank 0
    then packs them into ``<output_dir>/<archive>`` and logs where it is.

    Args:
        output_dir: Root of the submission (``tools/test.py --out`` sets it too).
        format_only: True for the label-free test split (mmseg's meaning: only write the
            results). False also computes the IoU metrics from the labels, e.g. to check the
            writer on the val split.
        task: 'comp6' (trained with data beyond VOC, such as SBD: the recipes) or 'comp5'.
        archive: Archive name (relative to ``output_dir``) or path; None writes no archive.
        **kwargs: Passed to ``IoUMetric`` (``iou_metrics``, ``ignore_index``, ...; mmseg's
            ``keep_results`` from ``tools/test.py --out`` is accepted and ignored).

    Raises:
        ValueError: No ``output_dir``, or an unknown ``task``.
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
                "VOCSubmissionMetric needs output_dir (set test_evaluator.output_dir or pass "
                "--out to tools/test.py)"
            )
        if task not in self.TASKS:
            raise ValueError(f"task must be one of {self.TASKS}, got {task!r}")
        # IoUMetric would write plain PNGs into output_dir itself: it gets none.
        super().__init__(output_dir=None, format_only=format_only, **kwargs)
        self.output_dir = output_dir
        self.task = task
        self.archive = archive
        self.folder = osp.join(output_dir, SUBMISSION_FOLDER.format(task=task))

    def process(self, data_batch: Any, data_samples: Sequence[dict]) -> None:
        """Write each prediction; keep its id (and, with labels, the IoU areas) for rank 0."""
        os.makedirs(self.folder, exist_ok=True)  # every rank: rank 0 may not have made it yet
        num_classes = len(self.dataset_meta["classes"])
        for sample in data_samples:
            pred = sample["pred_sem_seg"]["data"].squeeze(0)  # (H, W)
            image_id = osp.splitext(osp.basename(sample["img_path"]))[0]
            ori_shape = tuple(sample.get("ori_shape", pred.shape))
            if tuple(pred.shape) != ori_shape[:2]:
                raise ValueError(
                    f"prediction of {image_id} is {tuple(pred.shape)}, not the image's size "
                    f"{ori_shape[:2]}: the server needs predictions at the original size"
                )
            write_palette_png(pred.cpu().numpy(), osp.join(self.folder, f"{image_id}.png"))
            areas = None
            if not self.format_only:
                label = sample["gt_sem_seg"]["data"].squeeze(0).to(pred)
                areas = self.intersect_and_union(pred, label, num_classes, self.ignore_index)
            self.results.append((image_id, areas))

    def compute_metrics(self, results: list) -> dict[str, float]:
        """Pack the archive (rank 0, all ranks' PNGs written) and compute IoU if not format_only."""
        ids = [image_id for image_id, _ in results]
        metrics = {} if self.format_only else super().compute_metrics([a for _, a in results])
        print_log(
            f"{len(ids)} predictions in the VOC server format (indexed PNG, VOC palette) in "
            f"{self.folder}",
            logger="current",
        )
        if self.archive is not None:
            path = pack_submission(self.output_dir, ids, self.task, self.archive)
            print_log(
                f"VOC submission archive: {osp.abspath(path)} ({len(ids)} PNGs under "
                f"{SUBMISSION_FOLDER.format(task=self.task)}/). Upload it to the PASCAL VOC "
                f"evaluation server as segmentation {self.task} (docs/recipes.md).",
                logger="current",
            )
        return metrics
