"""Painted test predictions of every rank (``tools/test.py --show-dir``).

mmseg 1.2.2's ``SegVisualizationHook`` paints through ``SegLocalVisualizer.add_datasample``, which
mmengine 0.10.7 runs on rank 0 only (``master_only``): on N processes, only rank 0's share of the
test images was painted. :class:`EveryRankVisualizationHook` paints rank 0's images as they come,
as mmseg does; the other ranks keep what painting needs of theirs (the image path and the label
maps, PNG-compressed) and send it to rank 0 after the test loop, which paints them the same way,
under the same file names. The picture is mmseg's: the ground truth over the image on the left,
the prediction over the image on the right.
"""

from __future__ import annotations

import os.path as osp
from typing import Any, Optional

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

__all__ = ["EveryRankVisualizationHook", "pack_sample", "unpack_sample"]

#: The label maps a painted test image shows.
LABEL_MAPS = ("gt_sem_seg", "pred_sem_seg")


def pack_sample(sample: SegDataSample) -> dict[str, Any]:
    """What painting needs of a test sample, small enough to send between processes: its image
    path and its label maps as PNG bytes (16 bits where a value exceeds 255)."""
    packed: dict[str, Any] = {"img_path": sample.img_path}
    for key in LABEL_MAPS:
        if key in sample:
            label = sample.get(key).data.squeeze(0).cpu().numpy()
            dtype = np.uint8 if label.max(initial=0) < 256 else np.uint16
            packed[key] = cv2.imencode(".png", label.astype(dtype))[1].tobytes()
    return packed


def unpack_sample(packed: dict[str, Any]) -> SegDataSample:
    """The :class:`SegDataSample` of :func:`pack_sample`'s output (label maps as (1, H, W))."""
    sample = SegDataSample(metainfo={"img_path": packed["img_path"]})
    for key in LABEL_MAPS:
        if key in packed:
            label = cv2.imdecode(np.frombuffer(packed[key], np.uint8), cv2.IMREAD_UNCHANGED)
            sample.set_field(PixelData(data=torch.from_numpy(label.astype(np.int64))[None]), key)
    return sample


@HOOKS.register_module()
class EveryRankVisualizationHook(SegVisualizationHook):
    """mmseg's ``SegVisualizationHook`` whose test images are painted on every rank's share of
    the test set (validation during training stays mmseg's: rank 0's images). Same arguments.

    Attributes:
        painted: The names of the images painted by the last test (on rank 0; a name painted
            twice, e.g. a sample the distributed sampler repeats, is one file).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.painted: list[str] = []
        self._others: list[dict[str, Any]] = []  # this rank's packed samples (ranks > 0)

    def before_test(self, runner) -> None:  # noqa: ANN001  (mmengine's Runner)
        self.painted = []
        self._others = []

    def after_test_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if not self.draw or not self.every_n_inner_iters(batch_idx, self.interval):
            return
        for output in outputs or []:
            if is_main_process():
                self._paint(runner, output)
            else:
                self._others.append(pack_sample(output))

    def after_test_epoch(self, runner, metrics: Optional[dict] = None) -> None:  # noqa: ANN001
        if not self.draw:
            return
        if get_world_size() > 1:  # every rank takes part, rank 0 paints
            gathered = all_gather_object(self._others)
            if is_main_process():
                for packed in (p for rank in gathered for p in rank):
                    self._paint(runner, unpack_sample(packed))
        self._others = []
        if is_main_process():
            painted = len(set(self.painted))
            print_log(f"painted {painted} test images of {get_world_size()} rank(s)", "current")

    def _paint(self, runner, sample: SegDataSample) -> None:  # noqa: ANN001
        """Paint one test sample as mmseg's hook does (its image read from ``img_path``)."""
        img_bytes = fileio.get(sample.img_path, backend_args=self.backend_args)
        name = f"test_{osp.basename(sample.img_path)}"
        self._visualizer.add_datasample(
            name,
            mmcv.imfrombytes(img_bytes, channel_order="rgb"),
            data_sample=sample,
            show=self.show,
            wait_time=self.wait_time,
            step=runner.iter,
        )
        self.painted.append(name)
