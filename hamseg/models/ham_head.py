"""HamHead: the HamNet decode head (squeeze, Hamburger, align, classifier).

Geng et al., "Is Attention Better Than Matrix Decomposition?", ICLR 2021, Sec. 3.1 and the
authors' release (seg/HamNet/network.py): 3x3 conv-norm-act 2048 -> 512, Hamburger, 3x3
conv-norm-act 512 -> 256, Dropout2d(0.1), 1x1 classifier. Attribute names (``squeeze``,
``hamburger``, ``align``; mmseg's ``conv_seg`` for the release's ``fc.1``) make the released
checkpoint load 1:1.
"""

from __future__ import annotations

from typing import Any

from mmcv.cnn import ConvModule
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.registry import MODELS
from torch import Tensor

from .hamburger import Hamburger

__all__ = ["HamHead"]


@MODELS.register_module()
class HamHead(BaseDecodeHead):
    """Decode head of HamNet (a ResNet head, unlike mmseg's SegNeXt ``LightHamHead``).

    Args:
        ham_channels: Channels of the Hamburger's input and output (paper and release: 512).
        ham_cfg: Config of the decomposition (see :class:`~hamseg.models.Hamburger`), default
            ``dict(type='NMF', S=1, R=64, train_steps=6, eval_steps=6)``; D defaults to
            ``ham_channels // S`` (spatial folding).
        variant: Hamburger variant, 'release' (authors' V2, default) or 'paper' (Eq. 6).
        latent_channels: Channels d of the ham (default ``ham_channels``).
        **kwargs: :class:`BaseDecodeHead` arguments (``in_channels``, ``channels``,
            ``num_classes``, ``dropout_ratio=0.1``, ``norm_cfg``, ``act_cfg``, ...). The Hamburger
            uses the head's ``norm_cfg`` and ``act_cfg``.
    """

    def __init__(
        self,
        ham_channels: int = 512,
        ham_cfg: dict | None = None,
        variant: str = "release",
        latent_channels: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.ham_channels = ham_channels
        if ham_cfg is None:
            ham_cfg = dict(type="NMF", S=1, R=64, train_steps=6, eval_steps=6)
        conv_kwargs = dict(
            padding=1, conv_cfg=self.conv_cfg, norm_cfg=self.norm_cfg, act_cfg=self.act_cfg
        )
        self.squeeze = ConvModule(self.in_channels, ham_channels, 3, **conv_kwargs)
        self.hamburger = Hamburger(
            ham_channels,
            latent_channels=latent_channels,
            ham_cfg=ham_cfg,
            variant=variant,
            norm_cfg=self.norm_cfg,
            act_cfg=self.act_cfg,
        )
        self.align = ConvModule(ham_channels, self.channels, 3, **conv_kwargs)

    def _forward_feature(self, inputs: list[Tensor]) -> Tensor:
        """Features (B, channels, H, W) before the classifier."""
        x = self._transform_inputs(inputs)
        return self.align(self.hamburger(self.squeeze(x)))

    def forward(self, inputs: list[Tensor]) -> Tensor:
        """Logits (B, num_classes, H, W) at the resolution of the selected input."""
        return self.cls_seg(self._forward_feature(inputs))
