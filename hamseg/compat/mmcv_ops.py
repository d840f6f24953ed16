"""mmcv-lite: pure-PyTorch ``mmcv.ops.point_sample`` and ``sigmoid_focal_loss``, which mmseg 1.2.2
imports unguarded (open-mmlab/mmsegmentation#871), where no compiled ``mmcv._ext`` exists; any
other op raises the ``ModuleNotFoundError`` mmseg's guarded imports expect."""

import importlib.util
import sys
import types
import warnings

import torch.nn.functional as F
from torch import Tensor

MISSING_MMCV_MESSAGE = (
    "hamseg needs mmcv 2.0/2.1 and none is installed: run pip install 'hamseg[lite]' (mmcv-lite "
    "2.1.0, no compiled ops), or install a compiled mmcv 2.0/2.1 built for your torch and CUDA."
)
try:
    import mmcv
except ModuleNotFoundError as err:
    if err.name != "mmcv":
        raise
    raise ImportError(MISSING_MMCV_MESSAGE) from None


def point_sample(input: Tensor, points: Tensor, align_corners: bool = False, **kwargs) -> Tensor:
    """Sample (N, C, H, W) at points in [0, 1]^2 (x first): (N, P, 2) -> (N, C, P), or
    (N, Hg, Wg, 2) -> (N, C, Hg, Wg); ``kwargs`` go to ``grid_sample``."""
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
    """mmcv's compiled focal loss (Lin et al. 2017, Eq. 5) through mmseg's PyTorch one: logits
    (N, C), int64 targets (N,) in [0, C] (C: background), class ``weight`` (C,); 'mean' / N."""
    from mmseg.models.losses.focal_loss import py_sigmoid_focal_loss

    positive = F.one_hot(target, input.size(1) + 1)[:, :-1].to(input.dtype)  # (N, C)
    loss = py_sigmoid_focal_loss(input, positive, gamma=gamma, alpha=alpha, reduction="none")
    if weight is not None:
        loss = loss * weight[target].unsqueeze(1)
    if reduction == "none":
        return loss
    return loss.sum() / (input.size(0) if reduction == "mean" else 1)


class _LiteOps(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise ModuleNotFoundError(
            f"mmcv.ops.{name} is a compiled mmcv op and this environment has mmcv-lite: install "
            "a compiled mmcv 2.0/2.1 built for your torch to use it",
            name=f"mmcv.ops.{name}",
        )


def compiled_mmcv_available() -> bool:
    return importlib.util.find_spec("mmcv._ext") is not None


def install() -> bool:
    """Provide ``mmcv.ops`` when mmcv has no compiled ops (True, now or before); else False."""
    if isinstance(sys.modules.get("mmcv.ops"), _LiteOps):
        return True
    if compiled_mmcv_available():
        return False
    ops = _LiteOps("mmcv.ops", "hamseg's pure-PyTorch mmcv.ops for mmcv-lite")
    ops.point_sample, ops.sigmoid_focal_loss = point_sample, sigmoid_focal_loss
    sys.modules["mmcv.ops"] = mmcv.ops = ops
    warnings.filterwarnings("ignore", message="Fail to import ``MultiScaleDeformableAttention``")
    return True


REPLACED: bool = install()  # mmcv-lite
