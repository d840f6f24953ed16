"""HamLightHead: SegNeXt's decode head (Guo et al., NeurIPS 2022; mmseg's ``LightHamHead``) on
hamseg's hams. mmseg 1.2.2's structure and names, so its SegNeXt checkpoints load strictly and
its configs switch by ``type`` (``ham_kwargs`` understood); what differs: docs/segnext.md."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from mmcv.cnn import ConvModule
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.models.utils import resize
from mmseg.registry import MODELS
from torch import Tensor

from .hamburger import RELU, Hamburger

#: mmseg's ``ham_kwargs`` (NMF2D's) and their defaults.
MMSEG_DEFAULTS = dict(MD_S=1, MD_R=64, train_steps=6, eval_steps=7, inv_t=100, rand_init=True)


def ham_cfg_from_kwargs(ham_kwargs: dict) -> dict:
    """hamseg's NMF config for mmseg's ``ham_kwargs``; ``inv_t`` dropped (NMF uses 1, as mmseg's),
    ``rand_init=False`` is ``init='fixed'``; ValueError on an unknown key."""
    unknown = sorted(set(ham_kwargs) - set(MMSEG_DEFAULTS))
    if unknown:
        raise ValueError(f"ham_kwargs: unknown keys {unknown}; mmseg's: {list(MMSEG_DEFAULTS)}")
    kw = {**MMSEG_DEFAULTS, **ham_kwargs}
    init = "random" if kw["rand_init"] else "fixed"
    steps = dict(train_steps=kw["train_steps"], eval_steps=kw["eval_steps"])
    return dict(type="NMF", S=kw["MD_S"], R=kw["MD_R"], **steps, init=init)


@MODELS.register_module()
class HamLightHead(BaseDecodeHead):
    """SegNeXt's head: the selected levels resized to the first's size and concatenated, 1x1
    squeeze, the 'light' :class:`Hamburger`, 1x1 align, classifier.

    Args:
        ham_channels: Channels of the Hamburger (SegNeXt: 256 for T/S, 512 B, 1024 L).
        ham_cfg: hamseg's ham config; without ``type`` (or with ``ham_kwargs``) its entries
            override what ``ham_kwargs`` map to, e.g. ``dict(eval_seed=0, eval_draws=12)``.
        ham_kwargs: mmseg's argument; neither: mmseg's defaults (NMF, r = 64, 6/7 steps).
        **kwargs: :class:`BaseDecodeHead`'s (``in_channels`` a list, ``in_index``, ...).
    """

    def __init__(
        self,
        ham_channels: int = 512,
        ham_cfg: dict | None = None,
        ham_kwargs: dict | None = None,
        **kwargs: Any,
    ) -> None:
        if ham_kwargs is not None or "type" not in (ham_cfg or {}):
            ham_cfg = {**ham_cfg_from_kwargs(ham_kwargs or {}), **(ham_cfg or {})}
        super().__init__(input_transform="multiple_select", **kwargs)
        self.ham_channels = ham_channels
        conv = dict(conv_cfg=self.conv_cfg, norm_cfg=self.norm_cfg, act_cfg=self.act_cfg)
        self.squeeze = ConvModule(sum(self.in_channels), ham_channels, 1, **conv)
        # mmseg's block: F.relu whatever the head's act_cfg
        self.hamburger = Hamburger(ham_channels, None, ham_cfg, "light", self.norm_cfg, RELU)
        self.align = ConvModule(ham_channels, self.channels, 1, **conv)

    def forward(self, inputs: list[Tensor]) -> Tensor:
        """Logits (B, num_classes, H, W) at the first selected level's resolution."""
        levels = self._transform_inputs(inputs)
        kw = dict(size=levels[0].shape[2:], mode="bilinear", align_corners=self.align_corners)
        x = torch.cat([resize(level, **kw) for level in levels], dim=1)
        # At feature scale 1e4 the squeeze's sums pass fp16's 65504 (inf, then NaN from the
        # GroupNorm; mmseg's head too): under fp16 autocast it runs in float32, the rest in fp16.
        device = x.device.type
        fp16 = torch.is_autocast_enabled(device) and torch.get_autocast_dtype(device) == torch.half
        with torch.autocast(device, enabled=False) if fp16 else contextlib.nullcontext():
            x = self.squeeze(x.float() if fp16 else x)
        return self.cls_seg(self.align(self.hamburger(x)))
