"""HamHead: the HamNet decode head (squeeze, Hamburger, align, classifier).

Geng et al., "Is Attention Better Than Matrix Decomposition?", ICLR 2021, Sec. 3.1 and the
authors' release (seg/HamNet/network.py): 3x3 conv-norm-act 2048 -> 512, Hamburger, 3x3
conv-norm-act 512 -> 256, Dropout2d(0.1), 1x1 classifier. Attribute names (``squeeze``,
``hamburger``, ``align``; mmseg's ``conv_seg`` for the release's ``fc.1``) make the released
checkpoint load 1:1. Table 2's ablations: the Hamburger's part switches, and a head without it.
"""

from __future__ import annotations

from typing import Any

from mmcv.cnn import ConvModule
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.registry import MODELS
from torch import Tensor, nn

from .hamburger import Hamburger

__all__ = ["HamHead"]

CONV_INITS = ("mmseg", "pytorch")


@MODELS.register_module()
class HamHead(BaseDecodeHead):
    """Decode head of HamNet (a ResNet head, unlike mmseg's SegNeXt ``LightHamHead``).

    Args:
        ham_channels: Channels of the Hamburger's input and output (paper and release: 512).
        ham_cfg: Config of the decomposition (see :class:`~hamseg.models.Hamburger`), default
            ``dict(type='NMF', R=64, eval_seed=0, eval_draws=8)`` (evaluation: the mean of 8
            seeded draws, docs/evaluation.md); D defaults to ``ham_channels // S``.
        variant: Hamburger variant, 'release' (authors' V2, default) or 'paper' (Eq. 6).
        latent_channels: Channels d of the ham (default ``ham_channels``).
        with_hamburger: False for Table 2's baseline: squeeze, align and classifier only.
        with_lower_bread, with_ham, with_upper_bread: Table 2's switches of the Hamburger's
            parts (see :class:`~hamseg.models.Hamburger`).
        conv_init: Init of the squeeze, align and classifier convs: 'mmseg' (mmcv's ConvModule
            Kaiming init, mmseg's Normal(std=0.01) classifier) or 'pytorch' (PyTorch's default
            ``nn.Conv2d`` init, as in the release, where only the Hamburger sets its own;
            re-applied after mmengine's ``init_weights``). The Hamburger's init is the same
            either way.
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
        with_hamburger: bool = True,
        with_lower_bread: bool = True,
        with_ham: bool = True,
        with_upper_bread: bool = True,
        conv_init: str = "mmseg",
        **kwargs: Any,
    ) -> None:
        if conv_init not in CONV_INITS:
            raise ValueError(f"conv_init must be one of {CONV_INITS}, got {conv_init!r}")
        super().__init__(**kwargs)
        self.ham_channels = ham_channels
        self.conv_init = conv_init
        if ham_cfg is None:
            ham_cfg = dict(type="NMF", R=64, eval_seed=0, eval_draws=8)
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
        """mmengine's init (``init_cfg``, then each child's ``init_weights``), after which
        ``conv_init='pytorch'`` restores PyTorch's default init of the three convs."""
        first = not self.is_init
        super().init_weights()
        if first:
            self._reset_convs()

    def _reset_convs(self) -> None:
        """PyTorch's default init of squeeze, align and classifier for ``conv_init='pytorch'``:
        weights kaiming_uniform(a=sqrt(5)), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and so the
        biases; their norms keep weight 1 and bias 0 (PyTorch's default too)."""
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
