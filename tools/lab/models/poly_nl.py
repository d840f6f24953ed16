"""Poly-NL (Babiloni et al., ICCV 2021, Sec. 3.2, Eq. 6), a non-local block linear in N = H*W.

Z = alpha X + beta (Phi(X W1 ⊙ X W2) ⊙ X) W3, Phi the average over positions (a per-channel
gate); three N x C x C products, O(N). X is a feature map, "X W" a 1x1 conv without bias.
"""

from __future__ import annotations

from typing import Any

import torch
from mmseg.models.decode_heads.fcn_head import FCNHead
from mmseg.registry import MODELS
from torch import Tensor, nn

__all__ = ["PolyNL", "PolyNLHead"]


@MODELS.register_module()
class PolyNL(nn.Module):
    """The Poly-NL block, Z = alpha X + beta (Phi(X W1 ⊙ X W2) ⊙ X) W3 (Eq. 6).

    The paper leaves alpha and beta's start open: by default the identity (alpha = 1, beta =
    0, as DANet's zero gamma); beta gets a gradient from the first step on.

    Args:
        in_channels: C, channels of the input and of the output.
        alpha_init: Initial value of the learnable scalar alpha.
        beta_init: Initial value of the learnable scalar beta.
    """

    def __init__(self, in_channels: int, alpha_init: float = 1.0, beta_init: float = 0.0) -> None:
        super().__init__()
        if in_channels < 1:
            raise ValueError(f"in_channels must be positive, got {in_channels}")
        self.in_channels = in_channels
        # W1, W2, W3 in R^{C x C} of Eq. 6, applied as 1x1 convolutions (no bias in Eq. 6).
        self.w1 = nn.Conv2d(in_channels, in_channels, 1, bias=False)
        self.w2 = nn.Conv2d(in_channels, in_channels, 1, bias=False)
        self.w3 = nn.Conv2d(in_channels, in_channels, 1, bias=False)
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))
        self.beta = nn.Parameter(torch.tensor(float(beta_init)))

    def extra_repr(self) -> str:
        return f"in_channels={self.in_channels}"

    def gate(self, x: Tensor) -> Tensor:
        """Phi(X W1 ⊙ X W2) for X (B, C, H, W): the mean over positions, (B, C, 1, 1)
        (broadcasting is Phi's expansion)."""
        # (N, C) @ (C, C) -> (N, C), twice, as 1x1 convs
        return (self.w1(x) * self.w2(x)).mean(dim=(2, 3), keepdim=True)

    def forward(self, x: Tensor) -> Tensor:
        """Z (B, C, H, W) of X (B, C, H, W), Eq. 6."""
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"expected x of shape (B, {self.in_channels}, H, W), got {x.shape}")
        # (Phi(.) ⊙ X) W3: (B, C, 1, 1) * (B, C, H, W) -> (B, C, H, W), then
        # (N, C) @ (C, C) -> (N, C) as a 1x1 conv.
        y = self.w3(self.gate(x) * x)
        return self.alpha * x + self.beta * y


@MODELS.register_module()
class PolyNLHead(FCNHead):
    """mmseg's ``NLHead`` layout (3x3 conv, context block, 3x3 conv, optional concat and fusion
    conv, classifier) with Poly-NL as the context block.

    Args:
        alpha_init: Initial alpha of the Poly-NL block.
        beta_init: Initial beta of the Poly-NL block.
        **kwargs: :class:`~mmseg.models.decode_heads.FCNHead` arguments except ``num_convs``
            (always 2): ``in_channels``, ``channels``, ``num_classes``, ``concat_input``, ...
    """

    def __init__(self, alpha_init: float = 1.0, beta_init: float = 0.0, **kwargs: Any) -> None:
        if kwargs.pop("num_convs", 2) != 2:
            raise ValueError("PolyNLHead always has num_convs=2 (conv, Poly-NL, conv)")
        super().__init__(num_convs=2, **kwargs)
        self.poly_nl = PolyNL(self.channels, alpha_init=alpha_init, beta_init=beta_init)

    def _forward_feature(self, inputs: list[Tensor]) -> Tensor:
        """Features (B, channels, H, W) before the classifier."""
        x = self._transform_inputs(inputs)
        feats = self.convs[1](self.poly_nl(self.convs[0](x)))
        if self.concat_input:
            feats = self.conv_cat(torch.cat([x, feats], dim=1))
        return feats

    def forward(self, inputs: list[Tensor]) -> Tensor:
        """Logits (B, num_classes, H, W) at the resolution of the selected input."""
        return self.cls_seg(self._forward_feature(inputs))
