"""SegNeXt's light Hamburger block, on hamseg's decompositions.

Guo et al., "SegNeXt", NeurIPS 2022, as mmseg 1.2.2 ships it in ``LightHamHead``: Y = ReLU(Z +
ham_out(M(ReLU(ham_in(Z))))) with ``ham_in`` a 1x1 conv with bias (no norm, no activation) and
``ham_out`` a 1x1 conv with the head's norm (GroupNorm in the SegNeXt configs), no activation.
It is the Hamburger of Geng et al. (ICLR 2021, Eq. 5) with these breads; the ham M is any hamseg
decomposition (one-step gradient, seeded evaluation, float32 under autocast), and the block
reads through :meth:`layout` so the fused inference path (:mod:`hamseg.models.fused_hamburger`)
serves it as it serves :class:`~hamseg.models.Hamburger`. Parameter names are mmseg's
(``ham_in.conv``, ``ham_out.conv``, ``ham_out.gn``), so its checkpoints load as they are.
"""

from __future__ import annotations

from mmcv.cnn import ConvModule
from mmseg.registry import MODELS
from torch import Tensor, nn

from . import fused_hamburger
from .decompositions import MatrixDecomposition2D

__all__ = ["LightHamburger"]


@MODELS.register_module()
class LightHamburger(nn.Module):
    """Y = ReLU(Z + ham_out(M(ReLU(ham_in(Z))))), SegNeXt's block (see the module docstring).

    Args:
        ham_channels: Channels of Z, of the ham and of Y.
        ham_cfg: Config of the decomposition (``mmseg.registry.MODELS``), e.g.
            ``dict(type='NMF', S=1, R=16, train_steps=6, eval_steps=7)``; D defaults to
            ``ham_channels // S``.
        norm_cfg: Norm of ``ham_out`` (the head's; None for none).
    """

    #: As :attr:`hamseg.models.Hamburger.fast_path_min_positions`.
    fast_path_min_positions: int = 1024

    def __init__(self, ham_channels: int, ham_cfg: dict, norm_cfg: dict | None = None) -> None:
        super().__init__()
        ham_cfg = dict(ham_cfg)
        if ham_cfg.get("spatial", True):
            ham_cfg.setdefault("D", ham_channels // ham_cfg.get("S", 1))
        self.ham_in = ConvModule(ham_channels, ham_channels, 1, norm_cfg=None, act_cfg=None)
        self.relu_in = nn.ReLU(inplace=True)  # on ham_in's own output: NMF needs X >= 0
        self.ham: MatrixDecomposition2D = MODELS.build(ham_cfg)
        self.ham_out = ConvModule(ham_channels, ham_channels, 1, norm_cfg=norm_cfg, act_cfg=None)
        self.act = nn.ReLU()

    def layout(self) -> fused_hamburger.Layout:
        """The block as Y = act(Z + after(M(before(Z)))), for the fused inference path."""
        return fused_hamburger.Layout(
            (self.ham_in, self.relu_in), self.ham, (self.ham_out,), self.act
        )

    def forward(self, x: Tensor, bases: Tensor | None = None) -> Tensor:
        """Apply the block.

        Args:
            x: Z, (B, ham_channels, H, W).
            bases: Optional initial dictionary for the ham, (B*S, D, R).

        Returns:
            Y, same shape as ``x``.
        """
        if fused_hamburger.applies(self, x):
            return fused_hamburger.forward(self, x, bases)
        z = self.relu_in(self.ham_in(x))
        return self.act(x + self.ham_out(self.ham(z, bases)))
