"""SegNeXt's squeeze by level: sum_l resize(W_l x_l) instead of W cat(resize(x_l)).

A 1x1 conv and a bilinear resize commute, so each level's part of the weight runs at its level's
resolution and the resize is two matrix products (docs/benchmark.md, "Speed paths").
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from mmcv.cnn import ConvModule
from torch import Tensor

from hamseg.models.tracing import is_tracing

from .fused_hamburger import hooked, is_plain_conv1x1

__all__ = ["applies", "bilinear_matrix", "enabled", "forward"]

#: The switch: False makes the head resize, concatenate and convolve.
enabled = True


def applies(squeeze: ConvModule, levels: Sequence[Tensor]) -> bool:
    """Whether :func:`forward` computes what the module calls compute: a plain 1x1 conv-norm-act,
    no hook on the squeeze, no autocast, no trace or export (shapes stay symbolic)."""
    return (
        enabled
        and is_plain_conv1x1(squeeze.conv)
        and squeeze.order == ("conv", "norm", "act")
        and not hooked(squeeze)
        and not torch.is_autocast_enabled(levels[0].device.type)
        and not is_tracing()
    )


def forward(
    squeeze: ConvModule, levels: Sequence[Tensor], in_channels: Sequence[int], align_corners: bool
) -> Tensor:
    """``squeeze(cat([resize(x, size of levels[0]) for x in levels]))`` (B, C, H_0, W_0),
    computed by level; ``levels[l]`` is (B, in_channels[l], h_l, w_l)."""
    weights = squeeze.conv.weight.split(list(in_channels), dim=1)
    x = F.conv2d(levels[0], weights[0], squeeze.conv.bias)  # level 0 is at the output size
    B, C, H, W = x.shape
    total = x.reshape(B * C, H, W)  # a view unless x is channels-last
    for level, weight in zip(levels[1:], weights[1:]):
        part = F.conv2d(level, weight)  # W_l x_l at level l's resolution (B, C, h, w)
        h, w = part.shape[2:]
        if (h, w) == (H, W):
            total = total + part.reshape(B * C, H, W)
            continue
        a_h = bilinear_matrix(h, H, align_corners, part)
        a_w = bilinear_matrix(w, W, align_corners, part)
        # rows: (B C h, w) @ (w, W) -> (B C h, W)
        rows = torch.mm(part.reshape(B * C * h, w), a_w.t())
        # total + (H, h) @ (B C, h, W) -> (B C, H, W): the sum and the resize in one pass
        total = torch.baddbmm(total, a_h.expand(B * C, H, h), rows.view(B * C, h, W))
    x = total.view(B, C, H, W)
    if squeeze.with_norm:
        x = squeeze.norm(x)
    return squeeze.activate(x) if squeeze.with_activation else x


def bilinear_matrix(size_in: int, size_out: int, align_corners: bool, like: Tensor) -> Tensor:
    """A (size_out, size_in) of torch's 1-D bilinear interpolation (sizes given, no antialias):
    resizing rows Y (.., size_in) is Y A^T; in ``like``'s device and dtype."""
    dst = torch.arange(size_out, dtype=torch.float64)
    if align_corners:
        scale = (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
        src = dst * scale
    else:
        src = ((dst + 0.5) * (size_in / size_out) - 0.5).clamp_min(0.0)
    low = src.floor().long().clamp_max(size_in - 1)
    high = (low + 1).clamp_max(size_in - 1)
    frac = src - low
    matrix = torch.zeros(size_out, size_in, dtype=torch.float64)
    rows = torch.arange(size_out)
    matrix.index_put_((rows, low), 1.0 - frac, accumulate=True)
    matrix.index_put_((rows, high), frac, accumulate=True)
    return matrix.to(like.device, like.dtype)
