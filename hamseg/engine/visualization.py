"""Every rank's painted test images (``tools/test.py --show-dir``): mmengine 0.10.7's visualizer
paints on rank 0 only (its methods and even ``dataset_meta`` are ``master_only``), so mmseg
1.2.2's ``SegVisualizationHook`` painted rank 0's share alone. Here the other ranks send rank 0
what painting needs: the image path, the label maps as PNG bytes."""

import os.path as osp

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


def pack_sample(sample: SegDataSample) -> dict:
    """The image path and label maps of a test sample, as PNG bytes (16 bits above 255)."""
    packed = dict(img_path=sample.img_path)
    for key in ("gt_sem_seg", "pred_sem_seg"):
        if key in sample:
            label = sample.get(key).data.squeeze(0).cpu().numpy()
            label = label.astype(np.uint8 if label.max(initial=0) < 256 else np.uint16)
            packed[key] = cv2.imencode(".png", label)[1].tobytes()
    return packed


def unpack_sample(packed: dict) -> SegDataSample:
    sample = SegDataSample(metainfo=dict(img_path=packed.pop("img_path")))
    for key, png in packed.items():  # (1, H, W) int64 label maps
        label = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_UNCHANGED)
        sample.set_field(PixelData(data=torch.from_numpy(label.astype(np.int64))[None]), key)
    return sample


@HOOKS.register_module()
class EveryRankVisualizationHook(SegVisualizationHook):
    """mmseg's ``SegVisualizationHook`` (same arguments) painting every rank's test images on
    rank 0; validation stays mmseg's."""

    def before_test(self, runner) -> None:
        self.painted, self.others = set(), []  # names painted (rank 0), samples to send (others)

    def after_test_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if self.draw and self.every_n_inner_iters(batch_idx, self.interval):
            for output in outputs:
                if is_main_process():
                    self.paint(runner, output)
                else:
                    self.others.append(pack_sample(output))

    def after_test_epoch(self, runner, metrics: dict | None = None) -> None:
        if not self.draw:
            return
        for packed in (p for rank in all_gather_object(self.others) for p in rank):
            if is_main_process():  # every rank takes part in the gather, rank 0 paints
                self.paint(runner, unpack_sample(packed))
        painted = f"painted {len(self.painted)} test images of {get_world_size()} rank(s)"
        print_log(painted, "current")

    def paint(self, runner, sample: SegDataSample) -> None:
        """Paint one test sample as mmseg's hook does (its image read from ``img_path``)."""
        name = f"test_{osp.basename(sample.img_path)}"
        image = mmcv.imfrombytes(fileio.get(sample.img_path, self.backend_args), "color", "rgb")
        self._visualizer.add_datasample(
            name,
            image,
            data_sample=sample,
            show=self.show,
            wait_time=self.wait_time,
            step=runner.iter,
        )
        self.painted.add(name)
