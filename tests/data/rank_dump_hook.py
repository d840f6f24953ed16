"""A test hook: each rank saves its parameters after training (for the torchrun test)."""

import copy
import os.path as osp

import torch
from mmengine.dist import get_rank, get_world_size
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmseg.registry import HOOKS


@HOOKS.register_module()
class RankStateDumpHook(Hook):
    """Write ``rank{r}.pth`` with the initial and final state dicts into the work dir."""

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        self.initial = copy.deepcopy(model.state_dict())

    def after_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        state = dict(
            iter=runner.iter,
            world_size=get_world_size(),
            initial=self.initial,
            state_dict=model.state_dict(),
        )
        torch.save(state, osp.join(runner.work_dir, f"rank{get_rank()}.pth"))
