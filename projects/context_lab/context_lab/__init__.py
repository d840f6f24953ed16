"""The context-module lab (projects/context_lab/README.md): Poly-NL and AttnConv heads, the lab's
generated tasks, registered in mmseg's registries on import (configs: ``custom_imports``)."""

from mmseg.registry import DATASETS

import hamseg  # noqa: F401  (registers hamseg before the lab's modules use mmseg)
from hamseg.datasets.context_shapes import ContextShapesDataset

from .attn_conv import AttnConv
from .attn_conv_head import AttnConvHead
from .poly_nl import PolyNL, PolyNLHead


@DATASETS.register_module()
class ContextRoomsDataset(ContextShapesDataset):
    """A lab task's ``.png`` images and label maps (Context Shapes' seven classes)."""


__all__ = ["AttnConv", "AttnConvHead", "ContextRoomsDataset", "PolyNL", "PolyNLHead"]
