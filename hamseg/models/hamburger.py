"""The Hamburger block (Geng et al., ICLR 2021, Sec. 2.2.1, Eq. 5-6, Fig. 1, Table 2).

'paper' (Eq. 6): Y = Z + BN(W_u M(W_l Z)). 'release' (the authors' V2, the released VOC model):
Y = act(Z + W_u cheese(M(W_l Z))), cheese a 1x1 conv-norm-act. A ReLU precedes NMF. Names match
the release's checkpoint (``lower_bread.0``, ``cheese.conv/bn``, ``upper_bread``).
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
from .fused_hamburger import PointwiseConv

__all__ = ["Hamburger"]

VARIANTS = ("paper", "release")
DEFAULT_NORM = dict(type="BN", requires_grad=True)
DEFAULT_ACT = dict(type="ReLU")


def _identity(module: nn.Module) -> bool:
    return type(module) is nn.Identity


@MODELS.register_module()
class Hamburger(nn.Module):
    """Hamburger H(Z) = W_u M(W_l Z) with its skip connection (Eq. 5-6).

    Args:
        in_channels: Channels d_z of Z and of Y.
        latent_channels: Channels d of the ham (default d_z; paper and release: 512).
        ham_cfg: The decomposition's config (``mmseg.registry.MODELS``), default
            ``dict(type='NMF')``; D defaults to ``latent_channels // S`` (spatial folding).
        variant: 'paper' or 'release' (see the module docstring).
        norm_cfg: Norm of the upper bread ('paper') or of the cheese ('release'); None: none.
        act_cfg: Activation of the cheese and after the sum ('release'); None: none.
        with_lower_bread, with_ham, with_upper_bread: Table 2's ablations, each removes one
            part (the ReLU in front of NMF stays). Without the upper bread, 'paper' keeps Eq. 6's
            BN: Y = Z + BN(M(W_l Z)). Without a bread, d must equal d_z.
    """

    #: Inference through the ham's factors (:mod:`~hamseg.models.fused_hamburger`) on maps of
    #: at least this many positions (smaller ones: bit-identical module calls); None: off.
    fast_path_min_positions: int | None = 1024
    #: Device types of that path (measured faster on the CPU only, docs/gpu.md).
    fast_path_devices: tuple[str, ...] = fused_hamburger.FASTER_ON

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
        norm_cfg = copy.deepcopy(norm_cfg)
        act_cfg = copy.deepcopy(act_cfg)
        self.variant = variant

        ham_cfg = dict(type="NMF") if ham_cfg is None else dict(ham_cfg)
        if ham_cfg.get("spatial", True):
            ham_cfg.setdefault("D", latent // ham_cfg.get("S", 1))
        ham_type = ham_cfg["type"]
        ham_cls = MODELS.get(ham_type) if isinstance(ham_type, str) else ham_type
        ham = MODELS.build(ham_cfg) if with_ham else None

        conv = dict(conv_cfg=dict(type=PointwiseConv))
        lower = [PointwiseConv(in_channels, latent, 1)] if with_lower_bread else []
        if getattr(ham_cls, "nonnegative", False):
            # NMF needs X >= 0 (Sec. 2.2.2); never in place on Z itself (the skip input)
            lower.append(nn.ReLU(inplace=with_lower_bread))
        self.lower_bread = nn.Sequential(*lower)
        self.ham: MatrixDecomposition2D | None = ham  # None: M is the identity

        # Registration order lower bread, ham, cheese, upper bread: init_weights draws in it.
        self.cheese: nn.Module = nn.Identity()
        if variant == "release":
            self.cheese = ConvModule(latent, latent, 1, norm_cfg=norm_cfg, act_cfg=act_cfg, **conv)
        self.upper_bread: nn.Module = nn.Identity()
        self.norm: nn.Module = nn.Identity()  # Eq. 6's BN when it has no upper bread to follow
        if variant == "release" and with_upper_bread:
            self.upper_bread = PointwiseConv(latent, in_channels, 1, bias=False)
        elif with_upper_bread:
            # Eq. 6: the BN of BN(H(Z)) is the norm of the upper bread; no activation.
            self.upper_bread = ConvModule(
                latent, in_channels, 1, norm_cfg=norm_cfg, act_cfg=None, **conv
            )
        elif variant == "paper" and norm_cfg:
            self.norm = build_norm_layer(norm_cfg, latent)[1]
        # Eq. 6's branch ends with a norm, whose output backward does not read: the skip is
        # added to it in place (as to the fused path's own output), in training too
        self._sum_in_place = variant == "paper" and bool(norm_cfg)
        self.act: nn.Module = nn.Identity()
        if variant == "release" and act_cfg:
            self.act = build_activation_layer(act_cfg)
            if hasattr(self.act, "inplace"):
                self.act.inplace = True  # on the skip sum, this call's own tensor
        self.init_weights()

    def init_weights(self) -> None:
        """Release init: conv weights N(0, sqrt(2 / (k*k*out_channels))) (biases keep PyTorch's
        default), norms weight 1 and bias 0. The head's ``init_weights`` calls it."""
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
        """Y (B, in_channels, H, W) of Z = ``x``; ``bases``: the ham's initial dictionary
        (B*S, D, R), optional. In inference the conv after the ham multiplies its factors."""
        z = self.lower_bread(x)  # W_l Z (and the ReLU in front of NMF)
        after = [m for m in (self.cheese, self.upper_bread, self.norm) if not _identity(m)]
        fused = self.ham is not None and after and fused_hamburger.applies(self, z, after[0])
        if fused:
            z = fused_hamburger.conv_on_factors(after.pop(0), self.ham, z, bases, z is not x)
        elif self.ham is not None:
            z = self.ham(z, bases)  # M: the low-rank reconstruction D C (Eq. 7)
        for module in after:
            z = module(z)
        return self.act(z.add_(x) if fused or self._sum_in_place else x + z)
