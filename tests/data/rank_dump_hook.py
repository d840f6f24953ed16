"""A test hook: each rank saves its parameters after training (for the torchrun test)."""

import os.path as osp

import torch
from mmengine.dist import get_rank, get_world_size
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmseg.registry import HOOKS


@HOOKS.register_module()
class RankStateDumpHook(Hook):
    """Write ``rank{r}.pth`` with the initial and final parameters into the work dir.

    Parameters only: BN running statistics are per-rank buffers (each rank sees its own data).
    """

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        self.initial = {k: v.detach().clone() for k, v in model.named_parameters()}

    def after_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        state = dict(
            iter=runner.iter,
            world_size=get_world_size(),
            initial=self.initial,
            state_dict={k: v.detach() for k, v in model.named_parameters()},
        )
        torch.save(state, osp.join(runner.work_dir, f"rank{get_rank()}.pth"))
