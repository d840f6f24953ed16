"""SegNeXt's light Hamburger block (Guo et al., NeurIPS 2022; mmseg 1.2.2's ``LightHamHead``).

Y = ReLU(Z + ham_out(M(ReLU(ham_in(Z))))): Eq. 5 of Geng et al. (ICLR 2021) with ``ham_in`` a
1x1 conv with bias and ``ham_out`` a 1x1 conv-norm, on any hamseg ham. Parameter names are
mmseg's (``ham_in.conv``, ``ham_out.conv``, ``ham_out.gn``), so its checkpoints load as they are.
"""

from __future__ import annotations

from mmcv.cnn import ConvModule
from mmseg.registry import MODELS
from torch import Tensor, nn

from . import fused_hamburger
from .decompositions import MatrixDecomposition2D
from .fused_hamburger import PointwiseConv

__all__ = ["LightHamburger"]


@MODELS.register_module()
class LightHamburger(nn.Module):
    """Y = ReLU(Z + ham_out(M(ReLU(ham_in(Z))))), SegNeXt's block.

    Args:
        ham_channels: Channels of Z, of the ham and of Y.
        ham_cfg: The decomposition's config, e.g. ``dict(type='NMF', R=16)``; D defaults to
            ``ham_channels // S``.
        norm_cfg: Norm of ``ham_out`` (the head's; None for none).
    """

    #: As :attr:`hamseg.models.Hamburger.fast_path_min_positions` (None: switched off).
    fast_path_min_positions: int | None = 1024
    #: Device types of that path (measured faster on the CPU only, docs/gpu.md).
    fast_path_devices: tuple[str, ...] = fused_hamburger.FASTER_ON

    def __init__(self, ham_channels: int, ham_cfg: dict, norm_cfg: dict | None = None) -> None:
        super().__init__()
        ham_cfg = dict(ham_cfg)
        if ham_cfg.get("spatial", True):
            ham_cfg.setdefault("D", ham_channels // ham_cfg.get("S", 1))
        conv = dict(conv_cfg=dict(type=PointwiseConv), act_cfg=None)
        self.ham_in = ConvModule(ham_channels, ham_channels, 1, norm_cfg=None, **conv)
        self.relu_in = nn.ReLU(inplace=True)  # on ham_in's own output: NMF needs X >= 0
        self.ham: MatrixDecomposition2D = MODELS.build(ham_cfg)
        self.ham_out = ConvModule(ham_channels, ham_channels, 1, norm_cfg=norm_cfg, **conv)
        self.act = nn.ReLU(inplace=True)  # on the skip sum, this call's own tensor

    def forward(self, x: Tensor, bases: Tensor | None = None) -> Tensor:
        """Y (B, ham_channels, H, W) of Z = ``x``; ``bases``: the ham's initial dictionary
        (B*S, D, R), optional. In inference ``ham_out``'s conv multiplies the ham's factors."""
        z = self.relu_in(self.ham_in(x))
        if fused_hamburger.applies(self, z, self.ham_out):
            y = fused_hamburger.conv_on_factors(self.ham_out, self.ham, z, bases, True)
            return self.act(y.add_(x))
        return self.act(x + self.ham_out(self.ham(z, bases)))
