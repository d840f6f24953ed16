"""HamLightHead: SegNeXt's decode head (mmseg's ``LightHamHead``) on hamseg's hams.

Guo et al., NeurIPS 2022. mmseg 1.2.2's structure and names, so its SegNeXt checkpoints load
strictly and its configs switch by ``type`` (``ham_kwargs`` understood); what changes (one-step
gradient, seeded evaluation, float32 under autocast, any ham): docs/segnext.md.
"""

from __future__ import annotations

from typing import Any

import torch
from mmcv.cnn import ConvModule
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.models.utils import resize
from mmseg.registry import MODELS
from torch import Tensor

from . import level_squeeze
from .decompositions import DEFAULT_EVAL
from .light_hamburger import LightHamburger

__all__ = ["HamLightHead", "ham_cfg_from_kwargs"]

#: mmseg's ``ham_kwargs`` (NMF2D) -> hamseg's NMF arguments.
_KWARGS = {"MD_S": "S", "MD_R": "R", "train_steps": "train_steps", "eval_steps": "eval_steps"}
#: mmseg's defaults of ``ham_kwargs`` (``Matrix_Decomposition_2D_Base``).
MMSEG_DEFAULTS = dict(MD_S=1, MD_R=64, train_steps=6, eval_steps=7, inv_t=100, rand_init=True)


def ham_cfg_from_kwargs(ham_kwargs: dict) -> dict:
    """hamseg's ``ham_cfg`` for mmseg's ``ham_kwargs`` of ``LightHamHead``.

    ``inv_t`` is dropped (mmseg's NMF2D forces 1, as hamseg's NMF); ``rand_init=False`` is
    ``init='fixed'``; evaluation is the paper's protocol, as mmseg's: a new dictionary at every
    forward (docs/evaluation.md).

    Raises:
        ValueError: On a key that mmseg's NMF2D does not take.
    """
    unknown = sorted(set(ham_kwargs) - set(MMSEG_DEFAULTS))
    if unknown:
        raise ValueError(
            f"ham_kwargs: unknown keys {unknown}; mmseg's LightHamHead takes "
            f"{sorted(MMSEG_DEFAULTS)}"
        )
    kwargs = {**MMSEG_DEFAULTS, **ham_kwargs}
    cfg = {ours: kwargs[theirs] for theirs, ours in _KWARGS.items()}
    init = "random" if kwargs["rand_init"] else "fixed"
    return dict(type="NMF", **cfg, init=init, **DEFAULT_EVAL)


@MODELS.register_module()
class HamLightHead(BaseDecodeHead):
    """SegNeXt's head: the selected levels resized and concatenated, 1x1 squeeze,
    :class:`LightHamburger`, 1x1 align, classifier.

    Args:
        ham_channels: Channels of the Hamburger (SegNeXt: 256 for T/S, 512 B, 1024 L).
        ham_cfg: hamseg ham config, e.g. ``dict(type='NMF', R=16, train_steps=6,
            eval_steps=7)``.
        ham_kwargs: mmseg's argument instead (:func:`ham_cfg_from_kwargs`); with both, the
            entries of ``ham_cfg`` override (e.g. ``ham_cfg=dict(eval_seed=0, eval_draws=12)``:
            hamseg's deterministic ensemble). Neither: mmseg's defaults (NMF, r = 64, 6/7 steps).
        **kwargs: :class:`BaseDecodeHead` arguments (``in_channels`` list, ``in_index``,
            ``channels``, ``num_classes``, ``norm_cfg``, ...); always ``multiple_select``.

    Raises:
        ValueError: An unknown ``ham_kwargs`` key.
    """

    def __init__(
        self,
        ham_channels: int = 512,
        ham_cfg: dict | None = None,
        ham_kwargs: dict | None = None,
        **kwargs: Any,
    ) -> None:
        if ham_cfg is None or ham_kwargs is not None:
            ham_cfg = {**ham_cfg_from_kwargs(ham_kwargs or {}), **(ham_cfg or {})}
        super().__init__(input_transform="multiple_select", **kwargs)
        self.ham_channels = ham_channels
        conv = dict(conv_cfg=self.conv_cfg, norm_cfg=self.norm_cfg, act_cfg=self.act_cfg)
        self.squeeze = ConvModule(sum(self.in_channels), ham_channels, 1, **conv)
        self.hamburger = LightHamburger(ham_channels, ham_cfg, norm_cfg=self.norm_cfg)
        self.align = ConvModule(ham_channels, self.channels, 1, **conv)

    def forward(self, inputs: list[Tensor]) -> Tensor:
        """Logits (B, num_classes, H, W) at the resolution of the first selected level."""
        levels = self._transform_inputs(inputs)
        device = levels[0].device.type
        if torch.is_autocast_enabled(device) and torch.get_autocast_dtype(device) == torch.float16:
            # At feature scale 1e4 the squeeze's sums exceed fp16's 65504 (inf, then NaN from
            # the GroupNorm; mmseg's head too): it runs in float32, the rest under fp16.
            with torch.autocast(device, enabled=False):
                x = self._squeeze([level.float() for level in levels])
        else:
            x = self._squeeze(levels)
        return self.cls_seg(self.align(self.hamburger(x)))

    def _squeeze(self, levels: list[Tensor]) -> Tensor:
        """``squeeze(cat(levels resized to level 0's size))``, by level where that is exact."""
        if level_squeeze.applies(self.squeeze, levels):
            return level_squeeze.forward(self.squeeze, levels, self.in_channels, self.align_corners)
        size = levels[0].shape[2:]
        levels = [
            resize(x, size=size, mode="bilinear", align_corners=self.align_corners) for x in levels
        ]
        return self.squeeze(torch.cat(levels, dim=1))
