"""Every rank's painted test images (``tools/test.py --show-dir``): mmengine 0.10.7's visualizer
writes on rank 0 only, and mmseg 1.2.2's ``SegVisualizationHook`` painted rank 0's share alone."""

import os.path as osp

import mmcv
import mmengine.fileio as fileio
from mmengine.dist import all_gather_object, get_world_size, is_main_process
from mmengine.logging import print_log
from mmseg.engine.hooks import SegVisualizationHook
from mmseg.registry import HOOKS


@HOOKS.register_module()
class EveryRankVisualizationHook(SegVisualizationHook):
    """mmseg's ``SegVisualizationHook`` (same arguments) whose test images are painted on every
    rank, into the files rank 0's ``LocalVisBackend`` writes; validation stays mmseg's."""

    def before_test(self, runner) -> None:
        self.painted: list[str] = []

    def after_test_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if not (self.draw and self.every_n_inner_iters(batch_idx, self.interval)):
            return
        save_dir = (runner.cfg.get("visualizer") or {}).get("save_dir") or runner.log_dir
        for sample in outputs:
            name = f"test_{osp.basename(sample.img_path)}"
            image = mmcv.imfrombytes(fileio.get(sample.img_path, self.backend_args), "color", "rgb")
            # mmengine's Visualizer/LocalVisBackend file name (the slow test holds it)
            out = osp.join(save_dir, "vis_data", "vis_image", f"{name}_{runner.iter}.png")
            self._visualizer.add_datasample(
                name,
                image,
                data_sample=sample,
                show=self.show,
                wait_time=self.wait_time,
                out_file=None if is_main_process() else out,
                step=runner.iter,
            )
            self.painted.append(name)

    def after_test_epoch(self, runner, metrics: dict | None = None) -> None:
        if self.draw:
            painted = len({name for names in all_gather_object(self.painted) for name in names})
            print_log(f"painted {painted} test images of {get_world_size()} rank(s)", "current")
