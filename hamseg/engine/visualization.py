"""Every rank's painted test images (``tools/test.py --show-dir``): mmengine 0.10.7's visualizer is
``master_only`` throughout, so mmseg 1.2.2's ``SegVisualizationHook`` painted rank 0's alone."""

import os.path as osp

import mmcv
import mmengine.fileio as fileio
from mmengine.dist import all_gather_object, get_world_size, is_main_process
from mmengine.logging import print_log
from mmseg.engine.hooks import SegVisualizationHook
from mmseg.registry import HOOKS
from mmseg.structures import SegDataSample


@HOOKS.register_module()
class EveryRankVisualizationHook(SegVisualizationHook):
    """mmseg's ``SegVisualizationHook`` (same arguments) whose test images, every rank's, are
    painted on rank 0 (the other ranks send their image paths and label maps there)."""

    def before_test(self, runner) -> None:
        self.painted: set[str] = set()

    def after_test_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if not (self.draw and self.every_n_inner_iters(batch_idx, self.interval)):
            return
        keep = ("gt_sem_seg", "pred_sem_seg")  # what painting needs, not the logits
        mine = [
            SegDataSample(
                metainfo=dict(img_path=s.img_path), **{k: s.get(k).cpu() for k in keep if k in s}
            )
            for s in outputs
        ]
        for sample in (s for rank in all_gather_object(mine) for s in rank):
            if is_main_process():  # every rank takes part in the gather, rank 0 paints
                name = f"test_{osp.basename(sample.img_path)}"
                image = fileio.get(sample.img_path, backend_args=self.backend_args)
                self._visualizer.add_datasample(
                    name,
                    mmcv.imfrombytes(image, channel_order="rgb"),
                    data_sample=sample,
                    show=self.show,
                    wait_time=self.wait_time,
                    step=runner.iter,
                )
                self.painted.add(name)

    def after_test_epoch(self, runner, metrics: dict | None = None) -> None:
        if self.draw:
            painted = f"painted {len(self.painted)} test images of {get_world_size()} rank(s)"
            print_log(painted, "current")
