"""Poly-NL (Babiloni et al., ICCV 2021, Sec. 3.2, Eq. 6): a non-local block linear in N = H*W.

Z = alpha X + beta (Phi(X W1 ⊙ X W2) ⊙ X) W3, Phi the mean over positions (a per-channel gate):
three N x C x C products. "X W" is a 1x1 conv without bias.
"""

from __future__ import annotations

from typing import Any

import torch
from mmseg.models.decode_heads.fcn_head import FCNHead
from mmseg.registry import MODELS
from torch import Tensor, nn


@MODELS.register_module()
class PolyNL(nn.Module):
    """Eq. 6; alpha = 1, beta = 0 at init (the identity, as DANet's zero gamma)."""

    def __init__(self, in_channels: int, alpha_init: float = 1.0, beta_init: float = 0.0) -> None:
        super().__init__()
        if in_channels < 1:
            raise ValueError(f"in_channels must be positive, got {in_channels}")
        self.in_channels = in_channels
        self.w1, self.w2, self.w3 = (
            nn.Conv2d(in_channels, in_channels, 1, bias=False) for _ in "123"
        )
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))
        self.beta = nn.Parameter(torch.tensor(float(beta_init)))

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"expected x of shape (B, {self.in_channels}, H, W), got {x.shape}")
        # (N, C) @ (C, C) twice, then the mean over N: (B, C, 1, 1)
        gate = (self.w1(x) * self.w2(x)).mean(dim=(2, 3), keepdim=True)
        # (B, C, 1, 1) * (B, C, H, W), then (N, C) @ (C, C)
        return self.alpha * x + self.beta * self.w3(gate * x)


@MODELS.register_module()
class PolyNLHead(FCNHead):
    """mmseg's ``NLHead`` layout (conv, context block, conv, concat + fusion conv, classifier)
    with Poly-NL as the block; ``**kwargs``: FCNHead's, ``num_convs`` is always 2."""

    def __init__(self, alpha_init: float = 1.0, beta_init: float = 0.0, **kwargs: Any) -> None:
        if kwargs.pop("num_convs", 2) != 2:
            raise ValueError("PolyNLHead always has num_convs=2 (conv, Poly-NL, conv)")
        super().__init__(num_convs=2, **kwargs)
        self.poly_nl = PolyNL(self.channels, alpha_init=alpha_init, beta_init=beta_init)

    def forward(self, inputs: list[Tensor]) -> Tensor:
        x = self._transform_inputs(inputs)
        feats = self.convs[1](self.poly_nl(self.convs[0](x)))
        if self.concat_input:
            feats = self.conv_cat(torch.cat([x, feats], dim=1))
        return self.cls_seg(feats)
