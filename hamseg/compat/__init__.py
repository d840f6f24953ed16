"""Where hamseg adapts mmseg 1.2.2, mmengine 0.10.7, mmcv-lite 2.1.0 and torch 2.6-2.14 to each
other; each module applies its fix on import (``import hamseg`` imports this first), only where
the installed stack needs it; :mod:`.config_variables` only while a tool reads a config again
for its ``--cfg-options``. (The fixes to mmseg's own tool scripts are a checkout's:
tools/lib/mmseg_tool_fixes.py.)
"""

# The order matters: mmcv is checked and its ops provided before anything imports mmseg.
from .mmcv_check import require_mmcv
from .mmcv_ops import REPLACED as MMCV_OPS_REPLACED
from .package_lookup import REPLACED as PKG_RESOURCES_REPLACED

# isort: split
from . import checkpoint  # noqa: F401  (applied on import)

__all__ = ["MMCV_OPS_REPLACED", "PKG_RESOURCES_REPLACED", "require_mmcv"]
