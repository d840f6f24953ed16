"""Where hamseg adapts mmseg 1.2.2, mmengine 0.10.7, mmcv-lite 2.1.0 and torch 2.6-2.14 to each
other; each module applies its fix on import (``import hamseg`` imports this first), only where
the installed stack needs it: a missing mmcv (:mod:`.mmcv_check`), mmcv-lite's missing ops
(:mod:`.mmcv_ops`), ``weights_only`` loads (:mod:`.checkpoint`), ``mmseg::``/``hamseg::`` config
names (:mod:`.package_lookup`), ``MMSegInferencer`` on hamseg's configs (:mod:`.mmseg_inferencer`);
:mod:`.mmseg_tool_fixes` applies while one of mmseg's tool scripts runs.
"""

# The order matters: mmcv is checked and its ops provided before anything imports mmseg.
from .mmcv_check import require_mmcv
from .mmcv_ops import REPLACED as MMCV_OPS_REPLACED
from .package_lookup import REPLACED as PKG_RESOURCES_REPLACED

# isort: split
from . import checkpoint, mmseg_inferencer  # noqa: F401  (applied on import)

__all__ = ["MMCV_OPS_REPLACED", "PKG_RESOURCES_REPLACED", "require_mmcv"]
