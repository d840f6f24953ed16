"""The Hamburger block: lower bread, ham, (cheese,) upper bread and a skip connection.

Geng et al., "Is Attention Better Than Matrix Decomposition?", ICLR 2021, Sec. 2.2.1, Eq. 5-6,
Fig. 1. Two variants:

- ``'paper'`` (Eq. 6): Y = Z + BN(W_u M(W_l Z)); lower bread 1x1 conv (ReLU before NMF), upper
  bread 1x1 conv followed by the norm, no activation after the sum.
- ``'release'`` (the authors' "V2", used for the released VOC model): lower bread 1x1 conv with
  bias (ReLU before NMF), ham, "cheese" 1x1 conv-norm-act, upper bread 1x1 conv without bias and
  without norm, Y = act(Z + W_u cheese(M(W_l Z))).

Attribute names match the authors' checkpoint (``lower_bread.0``, ``cheese.conv/bn``,
``upper_bread``) so that its weights load 1:1.
"""

from __future__ import annotations

import copy
import math

from mmcv.cnn import ConvModule, build_activation_layer
from mmseg.registry import MODELS
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.instancenorm import _InstanceNorm

from .decompositions import MatrixDecomposition2D

__all__ = ["Hamburger"]

VARIANTS = ("paper", "release")
DEFAULT_NORM = dict(type="BN", requires_grad=True)
DEFAULT_ACT = dict(type="ReLU")


@MODELS.register_module()
class Hamburger(nn.Module):
    """Hamburger H(Z) = W_u M(W_l Z) with its skip connection (Eq. 5-6).

    Args:
        in_channels: Channels d_z of the input Z, and of the output.
        latent_channels: Channels d of the ham's input W_l Z. Defaults to ``in_channels`` (the
            paper and release use d = d_z = 512).
        ham_cfg: Config of the decomposition, built with ``mmseg.registry.MODELS``, e.g.
            ``dict(type='NMF', S=1, R=64, train_steps=6, eval_steps=6)`` (the default). With
            spatial folding D defaults to ``latent_channels // S``.
        variant: 'paper' or 'release' (see the module docstring).
        norm_cfg: Norm of the upper bread ('paper') or of the cheese ('release'); None for none.
        act_cfg: Activation of the cheese and after the skip sum ('release' only); None for
            none. The ReLU in front of NMF is not configurable (non-negativity).

    Raises:
        ValueError: On an unknown variant.
    """

    def __init__(
        self,
        in_channels: int,
        latent_channels: int | None = None,
        ham_cfg: dict | None = None,
        variant: str = "release",
        norm_cfg: dict | None = DEFAULT_NORM,
        act_cfg: dict | None = DEFAULT_ACT,
    ) -> None:
        super().__init__()
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        latent = latent_channels or in_channels
        norm_cfg, act_cfg = copy.deepcopy(norm_cfg), copy.deepcopy(act_cfg)
        self.variant = variant

        ham_cfg = dict(type="NMF") if ham_cfg is None else dict(ham_cfg)
        if ham_cfg.get("spatial", True):
            ham_cfg.setdefault("D", latent // ham_cfg.get("S", 1))
        ham: MatrixDecomposition2D = MODELS.build(ham_cfg)

        lower = [nn.Conv2d(in_channels, latent, 1)]
        if getattr(ham, "nonnegative", False):
            lower.append(nn.ReLU(inplace=True))  # NMF needs X >= 0 (Sec. 2.2.2)
        self.lower_bread = nn.Sequential(*lower)
        self.ham = ham

        if variant == "release":
            self.cheese = ConvModule(latent, latent, 1, norm_cfg=norm_cfg, act_cfg=act_cfg)
            self.upper_bread = nn.Conv2d(latent, in_channels, 1, bias=False)
            self.act = build_activation_layer(act_cfg) if act_cfg else nn.Identity()
        else:
            # Eq. 6: the BN of BN(H(Z)) is the norm of the upper bread; no activation.
            self.upper_bread = ConvModule(latent, in_channels, 1, norm_cfg=norm_cfg, act_cfg=None)
        self.init_weights()

    def init_weights(self) -> None:
        """Release init: conv weights N(0, sqrt(2 / (k*k*out_channels))), norms weight 1 bias 0.

        Conv biases keep PyTorch's default, as in the release. Also called by mmengine's
        ``BaseModule.init_weights`` of the head, which then does not reach the ConvModules here.
        """
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                nn.init.normal_(m.weight, 0.0, math.sqrt(2.0 / fan_out))
            elif isinstance(m, (_BatchNorm, _InstanceNorm, nn.GroupNorm, nn.LayerNorm)):
                if m.weight is not None:
                    nn.init.ones_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x: Tensor, bases: Tensor | None = None) -> Tensor:
        """Apply the block.

        Args:
            x: Z, (B, in_channels, H, W).
            bases: Optional initial dictionary for the ham, (B*S, D, R).

        Returns:
            Y, same shape as ``x``.
        """
        out = self.ham(self.lower_bread(x), bases)
        if self.variant == "release":
            return self.act(x + self.upper_bread(self.cheese(out)))
        return x + self.upper_bread(out)
