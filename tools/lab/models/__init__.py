"""The lab's context heads, registered in mmseg's ``MODELS`` on import: Poly-NL
(:mod:`~tools.lab.models.poly_nl`, ``PolyNL``, ``PolyNLHead``) and Andreoli's attention as
convolution (:mod:`~tools.lab.models.attn_conv`, ``AttnConv``;
:mod:`~tools.lab.models.attn_conv_head`, ``AttnConvHead``). They ask the lab's question on the
demo task (tools/compare_demo_heads.py) and fill Table 3's zoo (tools/benchmark_context.py); their
configs (tools/lab/configs/) import this package through ``custom_imports``. Not part of the
hamseg library."""

import hamseg  # noqa: F401  (adapts the stack before anything imports mmseg)

from .attn_conv import AttnConv
from .attn_conv_head import AttnConvHead
from .poly_nl import PolyNL, PolyNLHead

__all__ = ["AttnConv", "AttnConvHead", "PolyNL", "PolyNLHead"]
