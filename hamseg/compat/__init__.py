"""Adaptations of mmseg 1.2.2, mmengine 0.10.7, mmcv-lite 2.1.0 and torch 2.6-2.14 to each other:
one upstream bug per module, applied on import only where the installed stack has it, each pinned
by a canary in tests/compat/test_upstream_canaries.py. mmcv comes first: before mmseg."""

from .mmcv_ops import REPLACED as MMCV_OPS_REPLACED
from .package_lookup import REPLACED as PKG_RESOURCES_REPLACED

# isort: split
from .checkpoint import INSTALLED as CHECKPOINT_ADAPTED

__all__ = ["CHECKPOINT_ADAPTED", "MMCV_OPS_REPLACED", "PKG_RESOURCES_REPLACED"]
