"""Synchronized batch norm that also runs on CPU (gloo), for multi-process runs without a GPU.

torch's ``nn.SyncBatchNorm`` only runs on GPUs; the paper and the release use synchronized BN
everywhere (batch statistics over the whole global batch). :class:`HamSyncBatchNorm`, registered
in mmseg's ``MODELS`` as ``'HamSyncBN'``, computes the batch mean and variance of the global
batch with differentiable all-reduces on any device and backend, so a run on W processes with
batch B each matches (forward and gradients, up to rounding) a one-process run with batch W*B
and plain BN.

Configs keep ``norm_cfg=dict(type='SyncBN')`` (torch's layer) for GPUs. On a CPU machine,
:func:`hamseg.engine.distributed.setup_cpu_distributed` selects
:class:`CPUSyncBNDistributedDataParallel`,
which replaces every ``nn.SyncBatchNorm`` by :class:`HamSyncBatchNorm` (same parameters and
buffers, same names, so checkpoints are interchangeable) before wrapping the model in DDP.
"""

from __future__ import annotations

from typing import Any, Optional

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
    """Sum over processes; the backward pass sums the incoming gradients over processes too.

    With L = sum_r L_r, the gradient w.r.t. one process's summand is sum_r dL_r/d(total), which
    is what the all-reduce in backward computes.
    """

    @staticmethod
    def forward(ctx: Any, tensor: Tensor, group: Optional[Any]) -> Tensor:
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
    """Batch norm with statistics of the global batch, over any ``torch.distributed`` backend.

    In training mode with an initialised process group of more than one process, the per-channel
    mean is an all-reduced sum over the element count of all processes, then the (biased)
    variance is an all-reduced sum of squared deviations from that mean (two passes, as stable
    as a local BN). Both all-reduces are differentiable. Running statistics use the unbiased
    variance of the global batch, like ``nn.BatchNorm``. Otherwise (eval mode, one process, no
    process group) it is exactly ``nn.BatchNorm``.

    Args:
        num_features: Channels C of the (N, C, *) input.
        eps: Added to the variance.
        momentum: Running statistics momentum (None: cumulative average).
        affine: Learnable per-channel weight and bias.
        track_running_stats: Keep running mean and variance.
        process_group: Group to synchronize over (default: the whole world).
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: Optional[float] = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group: Optional[Any] = None,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_group = process_group

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (N, C, *), got {input.dim()}D")

    def _synchronized(self) -> bool:
        return (
            self.training
            and dist.is_available()
            and dist.is_initialized()
            and dist.get_world_size(self.process_group) > 1
        )

    def forward(self, input: Tensor) -> Tensor:
        """Normalise (N, C, *) with the statistics of the global batch in training mode."""
        if not self._synchronized():
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
                factor = (
                    1.0 / float(self.num_batches_tracked)
                    if self.momentum is None
                    else self.momentum
                )
                unbiased = sq_dev.detach() / (total_count - 1)
                self.running_mean.lerp_(mean.detach().to(self.running_mean.dtype), factor)
                self.running_var.lerp_(unbiased.to(self.running_var.dtype), factor)
        return out.to(input.dtype)


def convert_sync_batchnorm_to_ham(
    module: nn.Module, process_group: Optional[Any] = None
) -> nn.Module:
    """Replace every ``nn.SyncBatchNorm`` in ``module`` by :class:`HamSyncBatchNorm`.

    Parameters and buffers are moved over (the same tensor objects), names are kept, so the
    state dict and any optimizer built later are unaffected.

    Args:
        module: A model (modified in place) or a single layer.
        process_group: Group for the new layers (default: the whole world).

    Returns:
        ``module``, or its replacement if ``module`` itself is a ``nn.SyncBatchNorm``.
    """
    if isinstance(module, nn.SyncBatchNorm):
        new = HamSyncBatchNorm(
            module.num_features,
            module.eps,
            module.momentum,
            module.affine,
            module.track_running_stats,
            process_group,
        )
        if module.affine:
            new.weight = module.weight
            new.bias = module.bias
        if module.track_running_stats:
            new.running_mean = module.running_mean
            new.running_var = module.running_var
            new.num_batches_tracked = module.num_batches_tracked
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
    """``MMDistributedDataParallel`` for CPU processes: SyncBN layers become ``HamSyncBN`` first.

    Selected by :func:`hamseg.engine.distributed.setup_cpu_distributed` on machines without CUDA (as
    ``'mmseg.CPUSyncBNDistributedDataParallel'``); takes the same arguments as its base class.

    Args:
        module: The model to wrap.
        **kwargs: ``MMDistributedDataParallel``/``DistributedDataParallel`` arguments.
    """

    def __init__(self, module: nn.Module, **kwargs: Any) -> None:
        super().__init__(module=convert_sync_batchnorm_to_ham(module), **kwargs)
