"""The Hamburger blocks' speed paths; gains measured in docs/benchmark.md ("Speed paths"), on
the devices of :data:`FASTER_ON` only (on CUDA neither gained: docs/gpu.md).

- :class:`PointwiseConv`: the blocks' 1x1 convs as one matrix product per sample (torch's CPU
  convolution allocates extra maps; ``PointwiseConv.enabled = False`` switches it off).
- :func:`conv_on_factors`: in inference the conv after the ham multiplies the ham's factors,
  (W D) C instead of W (D C) (:meth:`MatrixDecomposition2D.factorize`), with an eval BatchNorm
  folded into W, written over the ham's input; the blocks then add the skip in place. A block's
  ``fast_path_min_positions = None`` switches it off.
"""

from __future__ import annotations

from typing import Any

import torch
from mmcv.cnn import ConvModule
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from hamseg.models.decompositions import MatrixDecomposition2D
from hamseg.models.tracing import is_tracing

__all__ = ["FASTER_ON", "PointwiseConv", "applies", "conv_on_factors", "hooked", "is_plain_conv1x1"]

#: Device types where both paths were measured faster than torch's own (the CPU); elsewhere the
#: blocks run cuDNN's 1x1 convolutions and the module path.
FASTER_ON = ("cpu",)


class PointwiseConv(nn.Conv2d):
    """A 1x1 ``nn.Conv2d`` (same parameters and state dict) computed as one matrix product per
    sample on the devices of :attr:`devices`; elsewhere, and while a graph is recorded, as a
    convolution."""

    #: The switch: False computes ``nn.Conv2d``'s convolution everywhere.
    enabled: bool = True
    #: Device types of the matrix-product path.
    devices: tuple[str, ...] = FASTER_ON

    def __init__(self, in_channels: int, out_channels: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(in_channels, out_channels, *args, **kwargs)
        if not is_plain_conv1x1(self):
            raise ValueError(f"PointwiseConv is a 1x1 conv (stride 1, no padding): {self}")

    def forward(self, x: Tensor) -> Tensor:
        if not self.enabled or x.device.type not in self.devices or is_tracing():
            return super().forward(x)
        B, C, H, W = x.shape
        # (B, C_out, C_in) @ (B, C_in, H*W) -> (B, C_out, H*W); not matmul(w, x), whose
        # backward copies x and the gradient transposed
        y = torch.bmm(self.weight.view(-1, C).expand(B, -1, -1), x.reshape(B, C, H * W))
        y = y.view(B, -1, H, W)
        if self.bias is None:
            return y
        bias = self.bias.view(-1, 1, 1).to(y.dtype)  # autocast's product dtype, as conv2d's
        if torch.is_grad_enabled():
            # a new tensor, not a view of the product: an in-place op on a view (the ReLU after
            # a bread) would make backward copy the whole gradient (CopySlices)
            return y + bias
        return y.add_(bias)


def applies(block: nn.Module, z: Tensor, after: nn.Module) -> bool:
    """Whether :func:`conv_on_factors` computes what the module calls ``after(block.ham(z))``
    compute: a float32/64 map of at least ``block.fast_path_min_positions`` positions on a
    device of ``block.fast_path_devices``, a spatial ham and a conv-norm-act ``after``, and
    nothing the module calls would record (autograd, a trace), round (autocast) or hook."""
    threshold = block.fast_path_min_positions
    return (
        threshold is not None
        and not is_tracing()  # a trace records the module calls (and keeps shapes symbolic)
        and not (torch.is_grad_enabled() or torch.is_autocast_enabled(z.device.type))
        and z.shape[2] * z.shape[3] >= threshold
        and z.device.type in block.fast_path_devices
        and z.dtype in (torch.float32, torch.float64)
        and block.ham.spatial
        and isinstance(after, ConvModule)
        and not hooked(block.ham, after)
    )


def conv_on_factors(
    after: ConvModule,
    ham: MatrixDecomposition2D,
    z: Tensor,
    bases: Tensor | None = None,
    overwrite: bool = False,
) -> Tensor:
    """``after(ham(z, bases))`` with the conv as (W D) C + b, written over ``z`` (the caller's
    own tensor) if ``overwrite``. With S groups W X_bar = [W_1 D_1 .. W_S D_S] [C_1; ..; C_S]."""
    dictionary, coef = ham.factorize(z, bases)  # (B*S, d, r), (B*S, r, n)
    B, C, H, W = z.shape
    BS, d, r = dictionary.shape
    S = BS // B
    n = coef.shape[2]
    weight = after.conv.weight.flatten(1)
    bias = after.conv.bias
    norm = after.norm if after.with_norm else None
    if isinstance(norm, _BatchNorm) and not norm.training and norm.running_var is not None:
        # BN(W x + b) = (s W) x + s (b - mean) + beta, s = gamma / sqrt(var + eps)
        scale = torch.rsqrt(norm.running_var + norm.eps)
        scale = scale * norm.weight if norm.weight is not None else scale
        bias = (-norm.running_mean if bias is None else bias - norm.running_mean) * scale
        bias = bias + norm.bias if norm.bias is not None else bias
        weight = weight * scale.unsqueeze(1)
        norm = None
    c_out = weight.shape[0]
    # (S, C_out, d) @ (B, S, d, r) -> (B, S, C_out, r) -> (B, C_out, S r)
    wd = torch.matmul(weight.view(c_out, S, d).transpose(0, 1), dictionary.view(B, S, d, r))
    wd = wd.transpose(1, 2).reshape(B, c_out, S * r)
    codes = coef.reshape(B, S * r, n)  # (B*S, r, n) -> (B, S r, n), a view
    out = z.view(B, C, n) if overwrite and c_out == C and z.is_contiguous() else None
    # (B, C_out, S r) @ (B, S r, n) -> (B, C_out, n)
    y = torch.bmm(wd, codes, out=out)
    if bias is not None:
        y = y.add_(bias.view(c_out, 1))
    y = y.view(B, c_out, H, W)
    if norm is not None:
        y = norm(y)
    return after.activate(y) if after.with_activation else y


def hooked(*modules: nn.Module) -> bool:
    """Whether a forward (pre-)hook would fire in one of ``modules`` or their submodules (or
    globally). torch has no public query for this: the dicts ``nn.Module.__call__`` reads."""
    hooks = nn.modules.module
    if hooks._global_forward_hooks or hooks._global_forward_pre_hooks:
        return True
    return any(m._forward_hooks or m._forward_pre_hooks for x in modules for m in x.modules())


def is_plain_conv1x1(conv: nn.Module) -> bool:
    """Whether ``conv`` is a 1x1 ``nn.Conv2d`` or :class:`PointwiseConv` (no stride, padding,
    dilation or groups)."""
    return (
        type(conv) in (nn.Conv2d, PointwiseConv)
        and conv.kernel_size == (1, 1)
        and conv.stride == (1, 1)
        and conv.padding in ((0, 0), "valid")
        and conv.dilation == (1, 1)
        and conv.groups == 1
    )
