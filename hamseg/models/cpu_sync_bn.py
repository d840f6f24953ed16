"""Synchronized batch norm on any device and backend (gloo too), and the CPU DDP wrapper.

torch's ``nn.SyncBatchNorm`` runs on GPUs only; the paper and the release use synchronized BN.
:class:`CPUSyncBNDistributedDataParallel` swaps every ``nn.SyncBatchNorm`` for
:class:`HamSyncBatchNorm` ('HamSyncBN'; same parameters, buffers and names) before DDP.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from mmengine.model import MMDistributedDataParallel
from mmseg.registry import MODEL_WRAPPERS, MODELS
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

__all__ = [
    "CPUSyncBNDistributedDataParallel",
    "HamSyncBatchNorm",
    "convert_sync_batchnorm_to_ham",
]


class _AllReduceSum(torch.autograd.Function):
    """Sum over processes; backward sums the gradients over processes too (L = sum_r L_r)."""

    @staticmethod
    def forward(ctx: Any, tensor: Tensor, group: Any | None) -> Tensor:
        ctx.group = group
        out = tensor.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        grad = grad.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(grad, op=dist.ReduceOp.SUM, group=ctx.group)
        return grad, None


@MODELS.register_module(name="HamSyncBN")
class HamSyncBatchNorm(_BatchNorm):
    """Batch norm with the statistics of the global batch, over any ``torch.distributed``
    backend: a W-process run with batch B each matches one process with batch W*B. Otherwise
    exactly ``nn.BatchNorm``; arguments as ``nn.BatchNorm2d``, and ``process_group``.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group: Any | None = None,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_group = process_group

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (N, C, *), got {input.dim()}D")

    def forward(self, input: Tensor) -> Tensor:
        """Normalise (N, C, *) with the statistics of the global batch in training mode."""
        if not (
            self.training
            and dist.is_available()
            and dist.is_initialized()
            and dist.get_world_size(self.process_group) > 1
        ):
            return super().forward(input)
        self._check_input_dim(input)
        channels = input.shape[1]
        if channels != self.num_features:
            raise ValueError(f"expected {self.num_features} channels, got {channels}")
        # Statistics in float32 at least (bf16/fp16 inputs under autocast).
        x = input.float() if torch.finfo(input.dtype).bits < 32 else input
        dims = [0, *range(2, x.dim())]
        view = (1, channels) + (1,) * (x.dim() - 2)

        count = torch.full((1,), x.numel() // max(channels, 1), dtype=x.dtype, device=x.device)
        # (C,) sums and the element count in one all-reduce: (C + 1,)
        totals = _AllReduceSum.apply(torch.cat([x.sum(dims), count]), self.process_group)
        total_count = totals[-1].detach()
        if total_count.item() <= 1:
            raise ValueError(
                f"Expected more than 1 value per channel in training, got {int(total_count)}"
            )
        mean = totals[:channels] / total_count
        centered = x - mean.view(view)
        # (C,) sum of squared deviations, all-reduced: the biased variance of the global batch.
        sq_dev = _AllReduceSum.apply((centered * centered).sum(dims), self.process_group)
        var = sq_dev / total_count
        out = centered * torch.rsqrt(var + self.eps).view(view)
        if self.affine:
            out = out * self.weight.view(view) + self.bias.view(view)

        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                factor = self.momentum
                if factor is None:  # cumulative average
                    factor = 1.0 / float(self.num_batches_tracked)
                unbiased = sq_dev.detach() / (total_count - 1)
                self.running_mean.lerp_(mean.detach().to(self.running_mean.dtype), factor)
                self.running_var.lerp_(unbiased.to(self.running_var.dtype), factor)
        return out.to(input.dtype)


def convert_sync_batchnorm_to_ham(module: nn.Module, process_group: Any | None = None) -> nn.Module:
    """Replace every ``nn.SyncBatchNorm`` in ``module`` (in place) by :class:`HamSyncBatchNorm`
    holding the same parameter and buffer objects; returns ``module`` or, for a single layer,
    its replacement."""
    if isinstance(module, nn.SyncBatchNorm):
        new = HamSyncBatchNorm(
            module.num_features,
            module.eps,
            module.momentum,
            module.affine,
            module.track_running_stats,
            process_group,
        )
        for name in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked"):
            if getattr(module, name, None) is not None:
                setattr(new, name, getattr(module, name))
        new.train(module.training)
        if hasattr(module, "qconfig"):
            new.qconfig = module.qconfig
        return new
    for name, child in module.named_children():
        converted = convert_sync_batchnorm_to_ham(child, process_group)
        if converted is not child:
            setattr(module, name, converted)
    return module


@MODEL_WRAPPERS.register_module()
class CPUSyncBNDistributedDataParallel(MMDistributedDataParallel):
    """``MMDistributedDataParallel`` whose SyncBN layers become ``HamSyncBN`` first (selected
    on CPU machines as ``'mmseg.CPUSyncBNDistributedDataParallel'``; the base's arguments)."""

    def __init__(self, module: nn.Module, **kwargs: Any) -> None:
        super().__init__(module=convert_sync_batchnorm_to_ham(module), **kwargs)
