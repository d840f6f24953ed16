"""AttnConvHead: HamHead's layout with attention as convolution (Andreoli) as the context block:
squeeze (3x3 conv-norm-act), Y = act(Z + norm(AttnConv(Z))) (hamseg's 'release' skip; AttnConv's
Theta^O and Theta_d end in C channels, so no upper bread), align (3x3 conv-norm-act), classifier.
"""

from __future__ import annotations

from typing import Any

from mmcv.cnn import ConvModule, build_activation_layer, build_norm_layer
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.registry import MODELS
from torch import Tensor, nn

from .attn_conv import AttnConv


@MODELS.register_module()
class AttnConvHead(BaseDecodeHead):
    """``attn_channels``: C of the block; ``attn_cfg``: :class:`AttnConv`'s options (Eq. 8-10,
    Def. 1-3); ``**kwargs``: BaseDecodeHead's (the block uses its norm_cfg and act_cfg)."""

    def __init__(
        self, attn_channels: int = 512, attn_cfg: dict | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        conv = dict(padding=1, conv_cfg=self.conv_cfg, norm_cfg=self.norm_cfg, act_cfg=self.act_cfg)
        self.squeeze = ConvModule(self.in_channels, attn_channels, 3, **conv)
        self.attn_conv = AttnConv(attn_channels, **(attn_cfg or {}))
        norm = build_norm_layer(self.norm_cfg, attn_channels)[1] if self.norm_cfg else None
        self.attn_norm = norm or nn.Identity()
        self.attn_act = build_activation_layer(self.act_cfg) if self.act_cfg else nn.Identity()
        self.align = ConvModule(attn_channels, self.channels, 3, **conv)

    def forward(self, inputs: list[Tensor]) -> Tensor:
        z = self.squeeze(self._transform_inputs(inputs))
        return self.cls_seg(self.align(self.attn_act(z + self.attn_norm(self.attn_conv(z)))))
