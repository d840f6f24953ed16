"""Painted test predictions of every rank (``tools/test.py --show-dir``): mmseg 1.2.2's
``SegVisualizationHook`` paints through a visualizer that mmengine 0.10.7 runs on rank 0 only, so
on N processes only rank 0's share of the test images was painted. Here the other ranks send what
painting needs (the image path, the label maps as PNG bytes) to rank 0 after the test loop."""

from __future__ import annotations

import os.path as osp
from typing import Any

import cv2
import mmcv
import mmengine.fileio as fileio
import numpy as np
import torch
from mmengine.dist import all_gather_object, get_world_size, is_main_process
from mmengine.logging import print_log
from mmengine.structures import PixelData
from mmseg.engine.hooks import SegVisualizationHook
from mmseg.registry import HOOKS
from mmseg.structures import SegDataSample

LABEL_MAPS = ("gt_sem_seg", "pred_sem_seg")


def pack_sample(sample: SegDataSample) -> dict[str, Any]:
    """The image path and label maps of a test sample, as PNG bytes (16 bits above 255)."""
    packed: dict[str, Any] = {"img_path": sample.img_path}
    for key in (k for k in LABEL_MAPS if k in sample):
        label = sample.get(key).data.squeeze(0).cpu().numpy()
        dtype = np.uint8 if label.max(initial=0) < 256 else np.uint16
        packed[key] = cv2.imencode(".png", label.astype(dtype))[1].tobytes()
    return packed


def unpack_sample(packed: dict[str, Any]) -> SegDataSample:
    """The :class:`SegDataSample` of :func:`pack_sample`'s output (label maps as (1, H, W))."""
    sample = SegDataSample(metainfo={"img_path": packed["img_path"]})
    for key in (k for k in LABEL_MAPS if k in packed):
        label = cv2.imdecode(np.frombuffer(packed[key], np.uint8), cv2.IMREAD_UNCHANGED)
        sample.set_field(PixelData(data=torch.from_numpy(label.astype(np.int64))[None]), key)
    return sample


@HOOKS.register_module()
class EveryRankVisualizationHook(SegVisualizationHook):
    """mmseg's ``SegVisualizationHook`` (same arguments) painting every rank's test images, as
    mmseg's picture (ground truth | prediction over the image); validation stays mmseg's.
    ``painted``: the names painted by the last test (rank 0)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.painted: list[str] = []
        self.others: list[dict[str, Any]] = []  # this rank's packed samples (ranks > 0)

    def before_test(self, runner) -> None:
        self.painted = []
        self.others = []

    def after_test_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if self.draw and self.every_n_inner_iters(batch_idx, self.interval):
            for output in outputs or []:
                if is_main_process():
                    self.paint(runner, output)
                else:
                    self.others.append(pack_sample(output))

    def after_test_epoch(self, runner, metrics: dict | None = None) -> None:
        if not self.draw:
            return
        if get_world_size() > 1:  # every rank takes part, rank 0 paints
            for packed in (p for rank in all_gather_object(self.others) for p in rank):
                if is_main_process():
                    self.paint(runner, unpack_sample(packed))
        self.others = []
        if is_main_process():
            painted = len(set(self.painted))
            print_log(f"painted {painted} test images of {get_world_size()} rank(s)", "current")

    def paint(self, runner, sample: SegDataSample) -> None:
        """Paint one test sample as mmseg's hook does (its image read from ``img_path``)."""
        name = f"test_{osp.basename(sample.img_path)}"
        img_bytes = fileio.get(sample.img_path, backend_args=self.backend_args)
        self._visualizer.add_datasample(
            name,
            mmcv.imfrombytes(img_bytes, channel_order="rgb"),
            data_sample=sample,
            show=self.show,
            wait_time=self.wait_time,
            step=runner.iter,
        )
        self.painted.append(name)
