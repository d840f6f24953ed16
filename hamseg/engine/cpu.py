"""Training without a GPU, opt-in (the tools import it; a config ``custom_imports`` it): mmengine
0.10.7's launcher, DDP wrapper and ``AmpOptimWrapper`` assume CUDA, torch's SyncBatchNorm too."""

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.model import MMDistributedDataParallel
from mmengine.optim import AmpOptimWrapper, OptimWrapper
from mmseg.registry import MODEL_WRAPPERS, MODELS, OPTIM_WRAPPERS
from torch import Tensor, nn
from torch.distributed.nn.functional import all_reduce


def setup_cpu_distributed(cfg: Config, launcher: str) -> bool:
    """Without CUDA, start a gloo group and select :class:`CPUSyncBNDistributedDataParallel`."""
    if launcher == "none" or torch.cuda.is_available():
        return False
    if launcher == "slurm":  # torch's rendezvous variables from slurm's, as mmengine does
        os.environ.setdefault("RANK", os.environ["SLURM_PROCID"])
        os.environ.setdefault("WORLD_SIZE", os.environ["SLURM_NTASKS"])
        os.environ.setdefault("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0"))
        os.environ.setdefault("MASTER_PORT", "29500")
        if "MASTER_ADDR" not in os.environ:
            nodes = ["scontrol", "show", "hostnames", os.environ["SLURM_NODELIST"]]
            os.environ["MASTER_ADDR"] = subprocess.check_output(nodes, text=True).split()[0]
    if not dist.is_initialized():
        dist.init_process_group(backend="gloo")  # RANK, WORLD_SIZE, MASTER_* from the launcher
    unused = cfg.get("find_unused_parameters", False)  # mmengine's Runner's defaults:
    default = dict(broadcast_buffers=False, find_unused_parameters=unused)
    wrapper = dict(cfg.get("model_wrapper_cfg") or default)
    if wrapper.get("type", "MMDistributedDataParallel") == "MMDistributedDataParallel":
        wrapper["type"] = "mmseg.CPUSyncBNDistributedDataParallel"
    cfg.model_wrapper_cfg = dict(wrapper, device_ids=None)
    return True


@MODELS.register_module(name="HamSyncBN")
class HamSyncBatchNorm(nn.modules.batchnorm._BatchNorm):
    """Batch norm over the global batch on any ``torch.distributed`` backend (W processes with
    batch B match one with batch W*B); plain BN in eval mode or without a group."""

    def _check_input_dim(self, input: Tensor) -> None:
        pass  # any (N, C, *) input

    def forward(self, input: Tensor) -> Tensor:
        group = getattr(self, "process_group", None)  # a converted SyncBN's
        if not (self.training and dist.is_initialized() and dist.get_world_size(group) > 1):
            return super().forward(input)
        x = input.float() if torch.finfo(input.dtype).bits < 32 else input  # bf16/fp16
        channels, dims = x.shape[1], [0, *range(2, x.dim())]
        view = (1, channels) + (1,) * (x.dim() - 2)
        count = x.new_full((1,), x.numel() // channels)
        # (C,) sums and the element count in one all-reduce, differentiable: (C + 1,)
        totals = all_reduce(torch.cat([x.sum(dims), count]), group=group)
        n = totals[-1].detach()
        mean = totals[:channels] / n
        centered = x - mean.view(view)
        sq_dev = all_reduce((centered * centered).sum(dims), group=group)  # (C,)
        out = centered * torch.rsqrt(sq_dev / n + self.eps).view(view)
        if self.affine:
            out = out * self.weight.view(view) + self.bias.view(view)
        if self.track_running_stats:
            self.num_batches_tracked.add_(1)
            factor = self.momentum or 1.0 / float(self.num_batches_tracked)  # None: average
            self.running_mean.lerp_(mean.detach().to(self.running_mean.dtype), factor)
            self.running_var.lerp_((sq_dev.detach() / (n - 1)).to(self.running_var.dtype), factor)
        return out.to(input.dtype)


def convert_sync_batchnorm_to_ham(module: nn.Module) -> nn.Module:
    """Every ``nn.SyncBatchNorm`` becomes a :class:`HamSyncBatchNorm` (in place, same tensors)."""
    if isinstance(module, nn.SyncBatchNorm):
        args = (module.num_features, module.eps, module.momentum, module.affine)
        new = HamSyncBatchNorm(*args, module.track_running_stats)
        new.__dict__.update(vars(module))
        return new
    for name, child in module.named_children():
        setattr(module, name, convert_sync_batchnorm_to_ham(child))
    return module


@MODEL_WRAPPERS.register_module()
class CPUSyncBNDistributedDataParallel(MMDistributedDataParallel):
    """``MMDistributedDataParallel`` whose SyncBN layers become ``HamSyncBN`` first."""

    def __init__(self, module: nn.Module, **kwargs: Any) -> None:
        super().__init__(module=convert_sync_batchnorm_to_ham(module), **kwargs)


@OPTIM_WRAPPERS.register_module()
class CPUAmpOptimWrapper(AmpOptimWrapper):
    """``--amp`` on CPU: CPU autocast to ``dtype`` and torch's CPU ``GradScaler`` for
    ``loss_scale`` (as ``AmpOptimWrapper``'s: 'dynamic', a float or a dict; None: no scaling)."""

    def __init__(self, dtype: str = "bfloat16", loss_scale: Any = None, **kwargs) -> None:
        OptimWrapper.__init__(self, **kwargs)  # AmpOptimWrapper.__init__ asserts a GPU
        self.cast_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        self._scale_update_param = loss_scale if isinstance(loss_scale, float) else None
        scaler = dict(enabled=loss_scale is not None)
        if isinstance(loss_scale, (float, dict)):
            scaler = loss_scale if isinstance(loss_scale, dict) else dict(init_scale=loss_scale)
        self.loss_scaler = torch.amp.GradScaler("cpu", **scaler)

    @contextmanager
    def optim_context(self, model: nn.Module) -> Iterator[None]:
        with OptimWrapper.optim_context(self, model), torch.autocast("cpu", self.cast_dtype):
            yield
