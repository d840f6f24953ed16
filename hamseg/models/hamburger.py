"""The Hamburger block (Geng et al., ICLR 2021, Sec. 2.2.1, Eq. 5-6, Table 2), one implementation
for the paper's block, the authors' released "V2" and SegNeXt's light block."""

from __future__ import annotations

import math

from mmcv.cnn import ConvModule, build_activation_layer, build_norm_layer
from mmseg.registry import MODELS
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

BN = dict(type="BN", requires_grad=True)
RELU = dict(type="ReLU")


@MODELS.register_module()
class Hamburger(nn.Module):
    """Y = act(Z + W_u M(W_l Z)) (Eq. 5-6); the ham M follows a ReLU for NMF (Sec. 2.2.2).

    - 'paper' (Eq. 6): Y = Z + BN(W_u M(W_l Z)).
    - 'release' (V2, the released VOC model): Y = ReLU(Z + W_u cheese(M(W_l Z))), cheese a 1x1
      conv-norm-act; the release's names (``lower_bread.0``, ``cheese.conv/bn``, ``upper_bread``).
    - 'light' (SegNeXt, mmseg's ``LightHamHead``): Y = ReLU(Z + norm(W_u M(ReLU(W_l Z)))); mmseg's
      names (``ham_in.conv``, ``ham_out.conv``, ``ham_out.gn``): its checkpoints load strictly.

    Args:
        in_channels: Channels d_z of Z and Y.
        latent_channels: Channels d of the ham (default d_z; paper and release: 512).
        ham_cfg: The ham's config, default ``dict(type='NMF')``; D defaults to d // S.
        variant: 'paper', 'release' or 'light'.
        norm_cfg: Norm of W_u ('paper', 'light') or of the cheese ('release'); None: none.
        act_cfg: Activation after the sum (and of the cheese) but in 'paper'; None: none.
        with_lower_bread, with_ham, with_upper_bread: Table 2's ablations, each removes one
            part (the ReLU before NMF stays; without W_u, 'paper' keeps Eq. 6's BN).
    """

    def __init__(
        self,
        in_channels: int,
        latent_channels: int | None = None,
        ham_cfg: dict | None = None,
        variant: str = "release",
        norm_cfg: dict | None = BN,
        act_cfg: dict | None = RELU,
        with_lower_bread: bool = True,
        with_ham: bool = True,
        with_upper_bread: bool = True,
    ) -> None:
        super().__init__()
        if variant not in ("paper", "release", "light"):
            raise ValueError(f"variant must be 'paper', 'release' or 'light', got {variant!r}")
        d = latent_channels or in_channels
        self.variant = variant
        ham_cfg = dict(ham_cfg or dict(type="NMF"))
        if ham_cfg.get("spatial", True):
            ham_cfg.setdefault("D", d // ham_cfg.get("S", 1))
        ham = MODELS.build(ham_cfg)
        relu = variant == "light" or ham.nonnegative  # NMF needs X >= 0 (Sec. 2.2.2)
        # W_l: a 1x1 conv with bias (+ ReLU); never in place on Z itself (the skip's input)
        lower = [nn.Conv2d(in_channels, d, 1)] if with_lower_bread else []
        lower += [nn.ReLU(inplace=with_lower_bread)] if relu else []
        if variant != "light":
            self.lower_bread = nn.Sequential(*lower)
        else:  # mmseg's names, here and for W_u
            lower = [ConvModule(in_channels, d, 1, act_cfg=RELU)] if with_lower_bread else lower
            self.ham_in = lower[0]
        self.ham = ham if with_ham else None
        cheese = dict(norm_cfg=norm_cfg, act_cfg=act_cfg)
        self.cheese = ConvModule(d, d, 1, **cheese) if variant == "release" else nn.Identity()
        # W_u: the release's is a bare conv; Eq. 6's BN is W_u's norm, or alone without W_u
        upper = nn.Identity()
        self.norm = nn.Identity()
        if with_upper_bread and variant == "release":
            upper = nn.Conv2d(d, in_channels, 1, bias=False)
        elif with_upper_bread:
            upper = ConvModule(d, in_channels, 1, norm_cfg=norm_cfg, act_cfg=None)
        elif norm_cfg and variant != "release":
            self.norm = build_norm_layer(norm_cfg, d)[1]
        self.add_module("ham_out" if variant == "light" else "upper_bread", upper)
        act_cfg = act_cfg if variant != "paper" else None
        self.act = build_activation_layer(act_cfg) if act_cfg else nn.Identity()
        self.init_weights()

    def init_weights(self) -> None:
        """The release's init: conv weights N(0, sqrt(2 / (k*k*out_channels))), norms weight 1,
        bias 0; conv biases keep PyTorch's default ('light': 0, as mmcv's ConvModule)."""
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                nn.init.normal_(m.weight, 0.0, math.sqrt(2.0 / fan_out))
                if m.bias is not None and self.variant == "light":
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (_BatchNorm, nn.GroupNorm)) and m.affine:
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor, bases: Tensor | None = None) -> Tensor:
        """Y (B, in_channels, H, W) of Z = ``x``; ``bases``: the ham's initial dictionary."""
        light = self.variant == "light"
        z = (self.ham_in if light else self.lower_bread)(x)  # W_l Z, ReLU'd before NMF
        if self.ham is not None:
            z = self.ham(z, bases)  # M: the low-rank reconstruction D C (Eq. 7)
        z = (self.ham_out if light else self.upper_bread)(self.cheese(z))
        return self.act(x + self.norm(z))
