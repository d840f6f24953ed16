"""The Hamburger block: lower bread, ham, (cheese,) upper bread and a skip connection.

Geng et al., "Is Attention Better Than Matrix Decomposition?", ICLR 2021, Sec. 2.2.1, Eq. 5-6,
Fig. 1. Two variants:

- ``'paper'`` (Eq. 6): Y = Z + BN(W_u M(W_l Z)); lower bread 1x1 conv (ReLU before NMF), upper
  bread 1x1 conv followed by the norm, no activation after the sum.
- ``'release'`` (the authors' "V2", used for the released VOC model): lower bread 1x1 conv with
  bias (ReLU before NMF), ham, "cheese" 1x1 conv-norm-act, upper bread 1x1 conv without bias and
  without norm, Y = act(Z + W_u cheese(M(W_l Z))).

Table 2's ablations remove one part each (``with_lower_bread``, ``with_ham``,
``with_upper_bread``). Attribute names match the authors' checkpoint (``lower_bread.0``,
``cheese.conv/bn``, ``upper_bread``) so that its weights load 1:1. The fused inference path
(BN folding, the low-rank product (W D) C, in-place writes) lives in
:mod:`hamseg.models.fused_hamburger`.
"""

from __future__ import annotations

import copy
import math

from mmcv.cnn import ConvModule, build_activation_layer, build_norm_layer
from mmseg.registry import MODELS
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.instancenorm import _InstanceNorm

from . import fused_hamburger
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
        with_lower_bread: False for Table 2's "- lower bread": the ham acts on Z itself (an
            NMF ham keeps its ReLU, so its input stays non-negative). Needs d = d_z.
        with_ham: False for Table 2's "- ham": M is the identity; both breads stay, and so does
            the lower bread's ReLU of an NMF config (the release's ``lower_bread`` module).
        with_upper_bread: False for Table 2's "- upper bread": no W_u; the 'paper' variant keeps
            the BN of Eq. 6, Y = Z + BN(M(W_l Z)). Needs d = d_z. Without both breads, Table 2's
            "only ham": Y = Z + BN(M(Z)) ('paper').

    Raises:
        ValueError: On an unknown variant, on a block without any of its three parts, and on
            d != d_z without one of the breads.
    """

    #: Feature maps with fewer positions H * W take the plain module calls: the fused path
    #: saves nothing measurable there, and small maps (tests, toy models) then give results
    #: bit-identical to the module calls (CD and VQ with 1/T = 100 amplify float rounding).
    fast_path_min_positions: int = 1024

    def __init__(
        self,
        in_channels: int,
        latent_channels: int | None = None,
        ham_cfg: dict | None = None,
        variant: str = "release",
        norm_cfg: dict | None = DEFAULT_NORM,
        act_cfg: dict | None = DEFAULT_ACT,
        with_lower_bread: bool = True,
        with_ham: bool = True,
        with_upper_bread: bool = True,
    ) -> None:
        super().__init__()
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        if not (with_lower_bread or with_ham or with_upper_bread):
            raise ValueError(
                "a Hamburger needs a bread or a ham; HamHead(with_hamburger=False) is the head "
                "without one (Table 2's baseline)"
            )
        latent = latent_channels or in_channels
        if not (with_lower_bread and with_upper_bread) and latent != in_channels:
            raise ValueError(
                f"without a bread the ham works on d_z channels: latent_channels={latent} must "
                f"equal in_channels={in_channels}"
            )
        norm_cfg, act_cfg = copy.deepcopy(norm_cfg), copy.deepcopy(act_cfg)
        self.variant = variant

        ham_cfg = dict(type="NMF") if ham_cfg is None else dict(ham_cfg)
        if ham_cfg.get("spatial", True):
            ham_cfg.setdefault("D", latent // ham_cfg.get("S", 1))
        ham_type = ham_cfg["type"]
        ham_cls = MODELS.get(ham_type) if isinstance(ham_type, str) else ham_type
        ham = MODELS.build(ham_cfg) if with_ham else None

        lower = [nn.Conv2d(in_channels, latent, 1)] if with_lower_bread else []
        if getattr(ham_cls, "nonnegative", False):
            # NMF needs X >= 0 (Sec. 2.2.2); never in place on Z itself (the skip input)
            lower.append(nn.ReLU(inplace=with_lower_bread))
        self.lower_bread = nn.Sequential(*lower)
        self.ham: MatrixDecomposition2D | None = ham  # None: M is the identity

        # Registration order lower bread, ham, cheese, upper bread: init_weights draws in it.
        self.cheese: nn.Module = nn.Identity()
        if variant == "release":
            self.cheese = ConvModule(latent, latent, 1, norm_cfg=norm_cfg, act_cfg=act_cfg)
        self.upper_bread: nn.Module = nn.Identity()
        self.norm: nn.Module = nn.Identity()  # Eq. 6's BN when it has no upper bread to follow
        if variant == "release" and with_upper_bread:
            self.upper_bread = nn.Conv2d(latent, in_channels, 1, bias=False)
        elif with_upper_bread:
            # Eq. 6: the BN of BN(H(Z)) is the norm of the upper bread; no activation.
            self.upper_bread = ConvModule(latent, in_channels, 1, norm_cfg=norm_cfg, act_cfg=None)
        elif variant == "paper" and norm_cfg:
            self.norm = build_norm_layer(norm_cfg, latent)[1]
        self.act: nn.Module = nn.Identity()
        if variant == "release" and act_cfg:
            self.act = build_activation_layer(act_cfg)
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

    def layout(self) -> fused_hamburger.Layout:
        """The block as Y = act(Z + after(M(before(Z)))), for the fused inference path."""
        after = (self.cheese, self.upper_bread, self.norm)
        return fused_hamburger.Layout(tuple(self.lower_bread), self.ham, after, self.act)

    def forward(self, x: Tensor, bases: Tensor | None = None) -> Tensor:
        """Apply the block: Y = Z + BN(W_u M(W_l Z)) ('paper', Eq. 6) or
        Y = act(Z + W_u cheese(M(W_l Z))) ('release').

        Where it is exact (a large float map without autocast or hooks, the full block), the
        fused inference path computes the same arithmetic with less memory traffic
        (:mod:`~hamseg.models.fused_hamburger`: breads as matrix products with an eval BN
        folded in, in-place writes, and without autograd (W D) C instead of W (D C)).

        Args:
            x: Z, (B, in_channels, H, W).
            bases: Optional initial dictionary for the ham, (B*S, D, R).

        Returns:
            Y, same shape as ``x``.
        """
        if fused_hamburger.applies(self, x):
            return fused_hamburger.forward(self, x, bases)
        z = self.lower_bread(x)  # W_l Z (and the ReLU in front of NMF)
        if self.ham is not None:
            z = self.ham(z, bases)  # M: the low-rank reconstruction D C (Eq. 7)
        return self.act(x + self.norm(self.upper_bread(self.cheese(z))))
