"""Pure-PyTorch ``mmcv.ops.point_sample`` and ``sigmoid_focal_loss`` for mmcv-lite.

mmseg 1.2.2 imports these two from ``mmcv.ops`` without a guard (upstream:
open-mmlab/mmsegmentation#871); mmcv-lite 2.1.0 has no compiled ``mmcv._ext``, so ``import
mmseg.models`` fails. Only then :func:`install` puts a stand-in in ``sys.modules['mmcv.ops']``
(any other name: the ``ModuleNotFoundError`` mmseg's guards expect).
tests/compat/test_upstream_canaries.py says when mmseg no longer needs it.
"""

from __future__ import annotations

import importlib.util
import sys
import types
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor

_MISSING_OP_HINT = (
    "mmcv.ops.{name} is a compiled mmcv op and this environment has mmcv-lite (no mmcv._ext). "
    "hamseg provides only point_sample and sigmoid_focal_loss in pure PyTorch. Install a compiled "
    "mmcv 2.0/2.1 built for your torch to use {name} "
    '(see docs/usage.md, "Keeping a compiled mmcv").'
)


def point_sample(input: Tensor, points: Tensor, align_corners: bool = False, **kwargs) -> Tensor:
    """``mmcv.ops.point_sample``: sample (N, C, H, W) at points in [0, 1]^2 (x first) given as
    (N, P, 2) -> (N, C, P) or (N, Hg, Wg, 2) -> (N, C, Hg, Wg); ``kwargs`` go to grid_sample."""
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
    """mmcv's compiled ``sigmoid_focal_loss`` (focal loss, Lin et al. 2017, eq. 5) on logits
    (N, C) and int64 targets (N,) in [0, C] (C: background); 'mean' divides by N, as mmcv does."""
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
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"unknown reduction {reduction!r}")
    return (
        loss if reduction == "none" else loss.sum() / (input.size(0) if reduction == "mean" else 1)
    )


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
    """Provide ``mmcv.ops`` when mmcv has no compiled ops (True, now or before); else False."""
    if isinstance(sys.modules.get("mmcv.ops"), _LiteOps):
        return True
    if compiled_mmcv_available():
        return False
    import mmcv  # present: mmcv_check ran first

    ops = _LiteOps("mmcv.ops", "hamseg's pure-PyTorch mmcv.ops for mmcv-lite")
    ops.point_sample = point_sample
    ops.sigmoid_focal_loss = sigmoid_focal_loss
    ops.__all__ = ["point_sample", "sigmoid_focal_loss"]
    sys.modules["mmcv.ops"] = ops
    mmcv.ops = ops
    # mmcv.cnn warns at every import that this compiled op is missing; here that is expected.
    warnings.filterwarnings("ignore", message="Fail to import ``MultiScaleDeformableAttention``")
    return True


#: Whether the stand-in is in use (mmcv-lite), set on import.
REPLACED: bool = install()
