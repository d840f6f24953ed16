"""HamHead, HamNet's decode head: 3x3 squeeze, Hamburger, 3x3 align, Dropout2d, classifier.

Geng et al., ICLR 2021, Sec. 3.1, and the release (seg/HamNet/network.py); names (``squeeze``,
``hamburger``, ``align``, ``conv_seg`` for the release's ``fc.1``) load its checkpoint 1:1.
"""

from __future__ import annotations

from typing import Any

from mmcv.cnn import ConvModule
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.registry import MODELS
from torch import Tensor, nn

from hamseg.utils.errors import UsageError

from .decompositions import DEFAULT_EVAL
from .hamburger import Hamburger

__all__ = ["HamHead"]

CONV_INITS = ("mmseg", "pytorch")


@MODELS.register_module()
class HamHead(BaseDecodeHead):
    """Decode head of HamNet (a ResNet head, unlike SegNeXt's ``HamLightHead``).

    Args:
        ham_channels: Channels of the Hamburger (paper and release: 512).
        ham_cfg: The decomposition's config, default ``dict(type='NMF', R=64, eval_seed=None,
            eval_draws=1)`` (evaluation: the paper's protocol, a new dictionary at every forward;
            ``eval_seed=0, eval_draws=12``: hamseg's ensemble, docs/evaluation.md).
        variant: Hamburger variant, 'release' (default) or 'paper' (Eq. 6).
        latent_channels: Channels d of the ham (default ``ham_channels``).
        with_hamburger: False for Table 2's baseline: squeeze, align and classifier only.
        with_lower_bread, with_ham, with_upper_bread: Table 2's switches of the Hamburger.
        conv_init: Init of the squeeze, align and classifier: 'mmseg' (mmcv's Kaiming, mmseg's
            Normal(0.01) classifier) or 'pytorch' (``nn.Conv2d``'s default, as the release;
            re-applied after mmengine's ``init_weights``). The Hamburger's init is its own.
        **kwargs: :class:`BaseDecodeHead` arguments; the Hamburger takes the head's
            ``norm_cfg`` and ``act_cfg``.
    """

    def __init__(
        self,
        ham_channels: int = 512,
        ham_cfg: dict | None = None,
        variant: str = "release",
        latent_channels: int | None = None,
        with_hamburger: bool = True,
        with_lower_bread: bool = True,
        with_ham: bool = True,
        with_upper_bread: bool = True,
        conv_init: str = "mmseg",
        **kwargs: Any,
    ) -> None:
        if conv_init not in CONV_INITS:
            raise ValueError(f"conv_init must be one of {CONV_INITS}, got {conv_init!r}")
        multi_level = isinstance(kwargs.get("in_channels"), (list, tuple))
        if "ham_kwargs" in kwargs or (multi_level and not kwargs.get("input_transform")):
            raise UsageError(
                "HamHead is HamNet's head for one ResNet feature map (in_channels: an int); for "
                "SegNeXt's multi-level input (in_channels a list) use type='HamLightHead', which "
                "also takes mmseg LightHamHead's ham_kwargs (HamHead: ham_cfg=dict(type='NMF'))"
            )
        super().__init__(**kwargs)
        self.ham_channels = ham_channels
        self.conv_init = conv_init
        if ham_cfg is None:
            ham_cfg = dict(type="NMF", R=64, **DEFAULT_EVAL)
        conv_kwargs = dict(
            padding=1, conv_cfg=self.conv_cfg, norm_cfg=self.norm_cfg, act_cfg=self.act_cfg
        )
        self.squeeze = ConvModule(self.in_channels, ham_channels, 3, **conv_kwargs)
        self.hamburger: nn.Module = nn.Identity()
        if with_hamburger:
            self.hamburger = Hamburger(
                ham_channels,
                latent_channels=latent_channels,
                ham_cfg=ham_cfg,
                variant=variant,
                norm_cfg=self.norm_cfg,
                act_cfg=self.act_cfg,
                with_lower_bread=with_lower_bread,
                with_ham=with_ham,
                with_upper_bread=with_upper_bread,
            )
        self.align = ConvModule(ham_channels, self.channels, 3, **conv_kwargs)
        self._reset_convs()

    def init_weights(self) -> None:
        """mmengine's init, then ``conv_init='pytorch'`` restores the three convs' default."""
        first = not self.is_init
        super().init_weights()
        if first:
            self._reset_convs()

    def _reset_convs(self) -> None:
        """``conv_init='pytorch'``: ``reset_parameters`` of squeeze, align and classifier."""
        if self.conv_init == "pytorch":
            for conv in (self.squeeze.conv, self.align.conv, self.conv_seg):
                conv.reset_parameters()

    def _forward_feature(self, inputs: list[Tensor]) -> Tensor:
        """Features (B, channels, H, W) before the classifier."""
        x = self._transform_inputs(inputs)
        return self.align(self.hamburger(self.squeeze(x)))

    def forward(self, inputs: list[Tensor]) -> Tensor:
        """Logits (B, num_classes, H, W) at the resolution of the selected input."""
        return self.cls_seg(self._forward_feature(inputs))
