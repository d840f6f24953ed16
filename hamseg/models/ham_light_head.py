"""HamLightHead: SegNeXt's decode head (mmseg's ``LightHamHead``) on hamseg's hams.

Guo et al., "SegNeXt", NeurIPS 2022; the Hamburger of Geng et al., ICLR 2021. Same structure
and parameter names as mmseg 1.2.2's ``LightHamHead`` (``squeeze``, ``hamburger.ham_in``,
``hamburger.ham_out``, ``align``, ``conv_seg``), so mmseg's SegNeXt checkpoints load strictly;
an mmseg SegNeXt config switches by changing ``type`` (``ham_kwargs`` is understood). What
changes is the ham: hamseg's NMF with the paper's one-step gradient (Sec. 2.3, Eq. 13) instead of
back-propagation through every step, a seeded dictionary in evaluation (``eval_seed``: the same
mIoU at every test run), the dictionary drawn on the input's device, float32 under fp16/bf16
autocast, and any other hamseg ham (CD, VQ, the init modes of App. F). Around the ham: the
squeeze runs in float32 under fp16 autocast (finite on features of scale 1e4, where mmseg's
overflows), and by level without concatenating the resized levels
(:mod:`hamseg.models.level_squeeze`: the same result within float rounding, faster).
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
from .light_hamburger import LightHamburger

__all__ = ["HamLightHead", "ham_cfg_from_kwargs"]

#: mmseg's ``ham_kwargs`` (NMF2D) -> hamseg's NMF arguments.
_KWARGS = {"MD_S": "S", "MD_R": "R", "train_steps": "train_steps", "eval_steps": "eval_steps"}
#: mmseg's defaults of ``ham_kwargs`` (``Matrix_Decomposition_2D_Base``).
MMSEG_DEFAULTS = dict(MD_S=1, MD_R=64, train_steps=6, eval_steps=7, inv_t=100, rand_init=True)


def ham_cfg_from_kwargs(ham_kwargs: dict) -> dict:
    """hamseg's ``ham_cfg`` for mmseg's ``ham_kwargs`` of ``LightHamHead``.

    mmseg's NMF2D forces ``inv_t = 1`` whatever the config says (as hamseg's NMF), so ``inv_t``
    is dropped; ``rand_init=False`` (one dictionary drawn once and kept as the ``bases``
    buffer) is hamseg's ``init='fixed'``. Evaluation averages 8 seeded draws (``eval_seed=0``,
    ``eval_draws=8``): that is what switching an mmseg config's ``type`` is for, the same mIoU at
    every test of a checkpoint, which another seed moves little (docs/evaluation.md).

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
    cfg = dict(type="NMF", **{ours: kwargs[theirs] for theirs, ours in _KWARGS.items()})
    cfg["init"] = "random" if kwargs["rand_init"] else "fixed"
    cfg.update(eval_seed=0, eval_draws=8)
    return cfg


@MODELS.register_module()
class HamLightHead(BaseDecodeHead):
    """SegNeXt's light Hamburger head: concat of the selected levels, 1x1 squeeze, Hamburger,
    1x1 align, classifier.

    Args:
        ham_channels: Channels of the Hamburger (SegNeXt: 256 for T/S, 512 B, 1024 L).
        ham_cfg: hamseg ham config, e.g. ``dict(type='NMF', S=1, R=16, train_steps=6,
            eval_steps=7, eval_seed=0, eval_draws=8)``; any hamseg decomposition and its options.
        ham_kwargs: mmseg's ``LightHamHead`` argument instead (:func:`ham_cfg_from_kwargs`,
            seeded evaluation). Given with ``ham_cfg``, the entries of ``ham_cfg`` override
            what ``ham_kwargs`` maps to (e.g. ``ham_cfg=dict(eval_seed=None)`` on an mmseg
            config: a new dictionary per forward, as mmseg). Neither given: mmseg's defaults
            (NMF, r = 64, 6 train / 7 eval steps), seeded.
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
            # The squeeze sums sum(in_channels) products of the backbone's features: at feature
            # scale 1e4 its output exceeds fp16's 65504 (inf, then NaN from the GroupNorm; mmseg's
            # head too). It runs in float32; its GroupNorm's output is bounded, and the rest of
            # the head runs under fp16 as before (the ham computes in float32 anyway).
            with torch.autocast(device, enabled=False):
                x = self._squeeze([level.float() for level in levels])
        else:
            x = self._squeeze(levels)
        return self.cls_seg(self.align(self.hamburger(x)))

    def _squeeze(self, levels: list[Tensor]) -> Tensor:
        """``squeeze(cat(resized levels))``, (B, ham_channels, H_0, W_0) at level 0's size;
        computed by level where that is exact (:mod:`~hamseg.models.level_squeeze`)."""
        if level_squeeze.applies(self.squeeze, levels):
            return level_squeeze.forward(self.squeeze, levels, self.in_channels, self.align_corners)
        size = levels[0].shape[2:]
        levels = [
            resize(x, size=size, mode="bilinear", align_corners=self.align_corners) for x in levels
        ]
        return self.squeeze(torch.cat(levels, dim=1))
