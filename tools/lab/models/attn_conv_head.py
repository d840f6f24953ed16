"""AttnConvHead: HamHead's layout with attention-as-convolution as the context module.

squeeze (3x3 conv-norm-act), the block Y = act(Z + norm(AttnConv(Z))), align (3x3
conv-norm-act), dropout and the 1x1 classifier. The block follows the skip convention of
hamseg's Hamburger ('release': act after the skip sum; the norm plays Eq. 6's BN): AttnConv's
Theta_k^O and Theta_d (Andreoli, Eq. 10 and Def. 1) already end in C channels, so no upper
bread is added.
"""

from __future__ import annotations

from typing import Any

from mmcv.cnn import ConvModule, build_activation_layer, build_norm_layer
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.registry import MODELS
from torch import Tensor, nn

from .attn_conv import AttnConv

__all__ = ["AttnConvHead"]


@MODELS.register_module()
class AttnConvHead(BaseDecodeHead):
    """Decode head: squeeze, AttnConv block with skip, norm and act, align, classifier.

    Args:
        attn_channels: C, channels of the AttnConv block (squeeze's output).
        attn_cfg: :class:`~tools.lab.models.attn_conv.AttnConv`'s options (``num_heads``,
            ``key_dim``, ``value_dim``, ``with_mu``/``nu``/``xi``, ``window``, ``index_heads``;
            Eq. 8-10, Def. 1-3); its defaults where left out.
        **kwargs: :class:`BaseDecodeHead` arguments (``in_channels``, ``channels``,
            ``num_classes``, ``norm_cfg``, ``act_cfg``, ...); the block uses the head's
            ``norm_cfg`` and ``act_cfg``.
    """

    def __init__(
        self, attn_channels: int = 512, attn_cfg: dict | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        conv_kwargs = dict(
            padding=1, conv_cfg=self.conv_cfg, norm_cfg=self.norm_cfg, act_cfg=self.act_cfg
        )
        self.squeeze = ConvModule(self.in_channels, attn_channels, 3, **conv_kwargs)
        self.attn_conv = AttnConv(attn_channels, **(attn_cfg or {}))
        self.attn_norm: nn.Module = nn.Identity()
        if self.norm_cfg:
            self.attn_norm = build_norm_layer(self.norm_cfg, attn_channels)[1]
        self.attn_act = build_activation_layer(self.act_cfg) if self.act_cfg else nn.Identity()
        self.align = ConvModule(attn_channels, self.channels, 3, **conv_kwargs)

    def _forward_feature(self, inputs: list[Tensor]) -> Tensor:
        """Features (B, channels, H, W) before the classifier."""
        z = self.squeeze(self._transform_inputs(inputs))
        return self.align(self.attn_act(z + self.attn_norm(self.attn_conv(z))))

    def forward(self, inputs: list[Tensor]) -> Tensor:
        """Logits (B, num_classes, H, W) at the resolution of the selected input."""
        return self.cls_seg(self._forward_feature(inputs))
