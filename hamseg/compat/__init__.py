"""The one place where hamseg adapts mmseg 1.2.2, mmengine 0.10.7, mmcv-lite 2.1.0 and torch
2.6-2.14 to each other; importing it (``import hamseg`` does, first) applies each fix only where
the installed stack needs it:

1. no mmcv at all: one ``ImportError`` line saying what to install (:mod:`.mmcv_check`);
2. mmcv-lite: pure-PyTorch ``mmcv.ops.point_sample`` / ``sigmoid_focal_loss`` (:mod:`.mmcv_ops`);
3. torch >= 2.6 ``weights_only`` loads of mmengine checkpoints (:mod:`.checkpoint`);
4. ``mmseg::`` configs without ``pkg_resources``, and ``hamseg::`` config names
   (:mod:`.package_lookup`);
5. mmseg's ``MMSegInferencer`` on hamseg's configs and model names (:mod:`.mmseg_inferencer`);
6. bugs of mmseg 1.2.2's tool scripts, while they run (:mod:`.mmseg_tool_fixes`).
"""

from .mmcv_check import require_mmcv  # noqa: I001  (before anything imports mmcv)

require_mmcv()

from . import checkpoint, mmcv_ops, package_lookup  # noqa: E402

MMCV_OPS_REPLACED: bool = mmcv_ops.install()
PKG_RESOURCES_REPLACED: bool = package_lookup.install()
package_lookup.register_hamseg()
checkpoint.install()

from . import mmseg_inferencer  # noqa: E402  (imports mmseg.apis: after the fixes above)

mmseg_inferencer.install()

__all__ = ["MMCV_OPS_REPLACED", "PKG_RESOURCES_REPLACED", "require_mmcv"]
