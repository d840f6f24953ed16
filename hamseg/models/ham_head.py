"""HamHead, HamNet's decode head (Geng et al., ICLR 2021, Sec. 3.1, and the release): 3x3
squeeze, Hamburger, 3x3 align, Dropout2d, classifier; names as the release's checkpoint."""

from __future__ import annotations

from typing import Any

from mmcv.cnn import ConvModule
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.registry import MODELS
from torch import Tensor, nn

from hamseg.utils.errors import UsageError

from .hamburger import Hamburger

#: The Hamburger's arguments that the head passes on.
BLOCK_ARGS = ("latent_channels", "variant", "with_lower_bread", "with_ham", "with_upper_bread")


@MODELS.register_module()
class HamHead(BaseDecodeHead):
    """Decode head of HamNet on one feature map (SegNeXt's head is ``HamLightHead``).

    Args:
        ham_channels: Channels of the Hamburger (paper and release: 512).
        ham_cfg: The ham's config, default ``dict(type='NMF', R=64)``.
        with_hamburger: False for Table 2's baseline (squeeze, align, classifier).
        conv_init: Init of squeeze, align and classifier: 'mmseg' or 'pytorch' (``nn.Conv2d``'s
            default, as the release).
        **kwargs: :class:`Hamburger`'s ``variant``, ``latent_channels`` and Table 2's switches;
            the rest :class:`BaseDecodeHead`'s (its ``norm_cfg`` and ``act_cfg`` reach the block).
    """

    def __init__(
        self,
        ham_channels: int = 512,
        ham_cfg: dict | None = None,
        with_hamburger: bool = True,
        conv_init: str = "mmseg",
        **kwargs: Any,
    ) -> None:
        levels = isinstance(kwargs.get("in_channels"), (list, tuple))
        if "ham_kwargs" in kwargs or (levels and not kwargs.get("input_transform")):
            raise UsageError(
                "HamHead takes one feature map; SegNeXt's levels, ham_kwargs: type='HamLightHead'"
            )
        block = {k: kwargs.pop(k) for k in BLOCK_ARGS if k in kwargs}
        super().__init__(**kwargs)
        self.ham_channels = ham_channels
        self.conv_init = conv_init
        conv = dict(padding=1, conv_cfg=self.conv_cfg, norm_cfg=self.norm_cfg, act_cfg=self.act_cfg)
        self.squeeze = ConvModule(self.in_channels, ham_channels, 3, **conv)
        block.update(norm_cfg=self.norm_cfg, act_cfg=self.act_cfg)
        block["ham_cfg"] = ham_cfg or dict(type="NMF", R=64)
        self.hamburger = Hamburger(ham_channels, **block) if with_hamburger else nn.Identity()
        self.align = ConvModule(ham_channels, self.channels, 3, **conv)
        self._reset_convs()

    def init_weights(self) -> None:
        """mmengine's init (once), then ``conv_init='pytorch'`` resets the three convs."""
        first = not self.is_init
        super().init_weights()
        if first:
            self._reset_convs()

    def _reset_convs(self) -> None:
        if self.conv_init == "pytorch":
            for conv in (self.squeeze.conv, self.align.conv, self.conv_seg):
                conv.reset_parameters()

    def forward(self, inputs: list[Tensor]) -> Tensor:
        """Logits (B, num_classes, H, W) at the selected input's resolution."""
        x = self._transform_inputs(inputs)
        return self.cls_seg(self.align(self.hamburger(self.squeeze(x))))
