"""Pure-PyTorch stand-ins for the two ``mmcv.ops`` that mmseg 1.2.2 imports unconditionally.

mmseg 1.2.2 imports ``point_sample`` (utils/mask_classification.py, models/utils/point_sample.py,
models/decode_heads/san_head.py) and ``sigmoid_focal_loss`` (models/losses/focal_loss.py) from
``mmcv.ops`` without a guard. mmcv-lite ships ``mmcv/ops`` but not the compiled ``mmcv._ext``, so
``import mmcv.ops`` fails and, with it, ``import mmseg.models``.

When (and only when) ``mmcv._ext`` cannot be found, :func:`install` puts a small module in
``sys.modules['mmcv.ops']`` that provides these two ops in PyTorch and answers any other name with a
``ModuleNotFoundError`` naming the op. ``ModuleNotFoundError`` is what mmseg's guarded imports
(``try: from mmcv.ops import X except ModuleNotFoundError``) expect, so they keep their fallbacks.
"""

from __future__ import annotations

import importlib.util
import sys
import types
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["point_sample", "sigmoid_focal_loss", "compiled_mmcv_available", "install"]

_MISSING_OP_HINT = (
    "mmcv.ops.{name} is a compiled mmcv op and this environment has mmcv-lite (no mmcv._ext). "
    "hamseg provides only point_sample and sigmoid_focal_loss in pure PyTorch. Install a compiled "
    "mmcv 2.0/2.1 built for your torch (see README, 'Keeping a compiled mmcv') to use {name}."
)


def point_sample(input: Tensor, points: Tensor, align_corners: bool = False, **kwargs) -> Tensor:
    """Sample ``input`` at normalised points, as ``mmcv.ops.point_sample``.

    Args:
        input: Feature map (N, C, H, W).
        points: Coordinates in [0, 1] x [0, 1] (x first), (N, P, 2) or (N, Hg, Wg, 2).
        align_corners: Passed to :func:`torch.nn.functional.grid_sample`.
        **kwargs: Further ``grid_sample`` arguments (mode, padding_mode).

    Returns:
        (N, C, P) for 3-d ``points``, else (N, C, Hg, Wg).
    """
    flat = points.dim() == 3
    grid = points.unsqueeze(2) if flat else points  # (N, P, 1, 2) or (N, Hg, Wg, 2)
    out = F.grid_sample(input, grid * 2.0 - 1.0, align_corners=align_corners, **kwargs)
    return out.squeeze(3) if flat else out


def sigmoid_focal_loss(
    input: Tensor,
    target: Tensor,
    gamma: float = 2.0,
    alpha: float = 0.25,
    weight: Tensor | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Sigmoid focal loss with the semantics of mmcv's compiled ``sigmoid_focal_loss``.

    For logits x (N, C) and class indices t (N,), with p = sigmoid(x), element (n, c) is
    ``-alpha (1-p)^gamma log p`` where t_n == c, else ``-(1-alpha) p^gamma log(1-p)``; an index
    t_n == C (background) makes every class negative. ``weight`` (C,) scales row n by
    ``weight[t_n]``. 'mean' divides the sum by N (not N*C), as mmcv does.

    Args:
        input: Logits (N, C).
        target: Class indices (N,), int64, in [0, C].
        gamma: Focusing parameter.
        alpha: Weight of the positive term.
        weight: Optional per-class weight (C,).
        reduction: 'none', 'mean' or 'sum'.

    Returns:
        (N, C) for 'none', else a scalar.
    """
    if input.dim() != 2 or target.dim() != 1 or input.size(0) != target.size(0):
        raise ValueError("sigmoid_focal_loss expects input (N, C) and target (N,)")
    if target.dtype != torch.long:
        raise TypeError("sigmoid_focal_loss expects int64 targets")
    num_classes = input.size(1)
    positive = F.one_hot(target, num_classes + 1)[:, :num_classes].to(input.dtype)  # (N, C)
    p = input.sigmoid()
    tiny = torch.finfo(input.dtype).tiny
    pos_term = (1 - p).pow(gamma) * p.clamp_min(tiny).log()
    neg_term = p.pow(gamma) * (1 - p).clamp_min(tiny).log()
    loss = -alpha * positive * pos_term - (1 - alpha) * (1 - positive) * neg_term
    if weight is not None:
        if weight.dim() != 1 or weight.numel() != num_classes:
            raise ValueError("weight must have shape (C,)")
        loss = loss * weight[target].unsqueeze(1)
    if reduction == "mean":
        return loss.sum() / input.size(0)
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"unknown reduction {reduction!r}")


class _LiteOps(types.ModuleType):
    """``mmcv.ops`` for mmcv-lite: two PyTorch ops, a clear error for every other name."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise ModuleNotFoundError(_MISSING_OP_HINT.format(name=name), name=f"mmcv.ops.{name}")


def compiled_mmcv_available() -> bool:
    """True when mmcv's compiled extension ``mmcv._ext`` is importable."""
    try:
        return importlib.util.find_spec("mmcv._ext") is not None
    except ModuleNotFoundError:  # no mmcv at all
        return False


def install() -> bool:
    """Provide ``mmcv.ops`` when mmcv has no compiled ops; touch nothing otherwise.

    Returns:
        True if the stand-in was installed (now or before), False if compiled mmcv is used.
    """
    current = sys.modules.get("mmcv.ops")
    if isinstance(current, _LiteOps):
        return True
    if compiled_mmcv_available():
        return False
    import mmcv

    ops = _LiteOps("mmcv.ops", "hamseg's pure-PyTorch mmcv.ops for mmcv-lite")
    ops.point_sample = point_sample
    ops.sigmoid_focal_loss = sigmoid_focal_loss
    ops.__all__ = ["point_sample", "sigmoid_focal_loss"]
    sys.modules["mmcv.ops"] = ops
    mmcv.ops = ops
    # mmcv.cnn warns at every import that this compiled op is missing; here that is expected.
    warnings.filterwarnings("ignore", message="Fail to import ``MultiScaleDeformableAttention``")
    return True
