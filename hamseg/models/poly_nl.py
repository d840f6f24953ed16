"""Poly-NL: a non-local block of linear complexity in the number of positions.

Babiloni et al., "Poly-NL: Linear Complexity Non-local Layers with Polynomials" (ICCV 2021),
Sec. 3.2, Eq. 6: for X in R^{N x C} (N = H * W positions),

    Z = alpha X + beta Y,   Y = (Phi(X W1 ⊙ X W2) ⊙ X) W3,

where W1, W2, W3 are C x C learnable matrices, alpha and beta learnable scalars, ⊙ the
Hadamard product and Phi an average over the N positions followed by an expansion back to
N x C. Phi makes the third-order interaction a per-channel gate, so the block costs three
N x C x C products, O(N) (Eq. 7 gives the element-wise form), against O(N^2) for
self-attention.

Here X is kept as a feature map (B, C, H, W); "X W" is a 1x1 convolution without bias.
"""

from __future__ import annotations

import torch
from mmseg.models.decode_heads.fcn_head import FCNHead
from mmseg.registry import MODELS
from torch import Tensor, nn

__all__ = ["PolyNL", "PolyNLHead"]


@MODELS.register_module()
class PolyNL(nn.Module):
    """The Poly-NL block, Z = alpha X + beta (Phi(X W1 ⊙ X W2) ⊙ X) W3 (Eq. 6).

    The paper does not state how alpha and beta start. By default the block starts as the
    identity (alpha = 1, beta = 0), like the zero-initialised gamma of DANet's attention
    modules, so inserting it does not disturb a network at initialisation; beta receives a
    gradient from the first step on.

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
        """Phi(X W1 ⊙ X W2) before the expansion: the average over positions, (B, C, 1, 1).

        Args:
            x: X, (B, C, H, W).

        Returns:
            The per-channel gate, (B, C, 1, 1); broadcasting performs Phi's expansion.
        """
        # (N, C) @ (C, C) -> (N, C), twice, as 1x1 convs: (B, C, H, W) -> (B, C, H, W)
        interaction = self.w1(x) * self.w2(x)
        return interaction.mean(dim=(2, 3), keepdim=True)

    def forward(self, x: Tensor) -> Tensor:
        """Apply Eq. 6.

        Args:
            x: X, (B, C, H, W).

        Returns:
            Z, (B, C, H, W).
        """
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"expected x of shape (B, {self.in_channels}, H, W), got {x.shape}")
        # (Phi(.) ⊙ X) W3: (B, C, 1, 1) * (B, C, H, W) -> (B, C, H, W), then
        # (N, C) @ (C, C) -> (N, C) as a 1x1 conv.
        y = self.w3(self.gate(x) * x)
        return self.alpha * x + self.beta * y


@MODELS.register_module()
class PolyNLHead(FCNHead):
    """FCN-style decode head with a Poly-NL block between its two convs.

    The same layout as mmseg's ``NLHead`` (3x3 conv, context block, 3x3 conv, optional concat
    with the input and a 3x3 fusion conv, classifier), with the quadratic non-local block
    replaced by Poly-NL, so that the two heads differ only in their context module.

    Args:
        alpha_init: Initial alpha of the Poly-NL block.
        beta_init: Initial beta of the Poly-NL block.
        **kwargs: :class:`~mmseg.models.decode_heads.FCNHead` arguments except ``num_convs``
            (always 2): ``in_channels``, ``channels``, ``num_classes``, ``concat_input``, ...
    """

    def __init__(self, alpha_init: float = 1.0, beta_init: float = 0.0, **kwargs) -> None:
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
