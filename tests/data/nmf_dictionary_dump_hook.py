"""A test hook: each rank saves its seed, its first training-mode NMF dictionary and its initial
parameters (for the per-rank seed test, tests/configs/test_per_rank_seed.py)."""

import os.path as osp

import torch
from mmengine.dist import get_rank, get_world_size
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmseg.registry import HOOKS

from hamseg.models.decompositions import MatrixDecomposition2D


@HOOKS.register_module()
class NMFDictionaryDumpHook(Hook):
    """Write ``dictionary_rank{r}.pth`` into the work dir after training.

    The dictionary is the first random one the decomposition draws in training mode (recorded
    where its iterations start from it: the public ``init_coef(x, bases)``).
    """

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        self.initial = {k: v.detach().clone() for k, v in model.named_parameters()}
        self.first = None
        hams = [m for m in model.modules() if isinstance(m, MatrixDecomposition2D)]
        assert len(hams) == 1, hams
        ham = hams[0]
        init_coef = ham.init_coef

        def recording_init_coef(x, bases):
            if ham.training and self.first is None:
                self.first = bases.detach().clone()
            return init_coef(x, bases)

        ham.init_coef = recording_init_coef

    def after_train(self, runner) -> None:
        state = dict(
            seed=runner.seed,
            world_size=get_world_size(),
            dictionary=self.first,
            initial=self.initial,
        )
        torch.save(state, osp.join(runner.work_dir, f"dictionary_rank{get_rank()}.pth"))
