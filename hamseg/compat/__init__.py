"""The one place where hamseg adapts mmseg 1.2.2 / mmengine 0.10.7 / mmcv-lite to today's torch.

Importing this package (``import hamseg`` does it first) applies every fix that the environment
needs and nothing else:

0. No mmcv at all: one ``ImportError`` line saying what to install (:func:`require_mmcv`).
1. ``mmcv.ops`` without compiled mmcv: pure-PyTorch ``point_sample`` and ``sigmoid_focal_loss``,
   a clear error for any other op (:mod:`hamseg.compat.mmcv_ops`). Skipped when ``mmcv._ext``
   exists.
2. torch >= 2.6 ``weights_only`` loading of mmengine checkpoints: allow-list exactly the types
   mmengine writes, keep ``weights_only=True`` on every mmengine load and refuse a checkpoint
   with pickled callables with a clear message (:mod:`hamseg.compat.checkpoint`).
3. Config paths (:mod:`hamseg.compat.package_lookup`): ``mmseg::`` without ``pkg_resources``
   (skipped when ``pkg_resources`` imports), and ``hamseg::`` in ``_base_``,
   ``Config.fromfile`` and ``mmengine.hub.get_config`` (hamseg's configs ship in the package,
   ``hamseg/.mim/configs``, as mmseg's do; mmengine's scope for them is mmseg's).
4. CPU multi-process training: :func:`setup_cpu_distributed`, called by tools/train.py and
   tools/test.py (:mod:`hamseg.compat.distributed`); its DDP wrapper swaps torch's SyncBN for
   the gloo-capable ``HamSyncBN``.
5. ``--amp`` without a GPU: :class:`CPUAmpOptimWrapper` (bfloat16 autocast) in
   :mod:`hamseg.compat.amp`.
6. Crash-safe checkpoints: atomic checkpoint and ``last_checkpoint`` writes, and a resume that
   skips incomplete files (:mod:`hamseg.compat.atomic_checkpoint`).
7. mmseg's ``MMSegInferencer`` on hamseg's configs (it finds the image loader by mmseg's type
   name) and hamseg's model names (after mmseg's own) (:mod:`hamseg.compat.mmseg_inferencer`).
"""

from .mmcv_check import require_mmcv  # noqa: I001  (before anything imports mmcv)

require_mmcv()

from . import checkpoint, mmcv_ops, package_lookup  # noqa: E402

MMCV_OPS_REPLACED: bool = mmcv_ops.install()
PKG_RESOURCES_REPLACED: bool = package_lookup.install()
package_lookup.register_hamseg()
checkpoint.install()
from . import atomic_checkpoint  # noqa: E402

atomic_checkpoint.install()

from . import mmseg_inferencer  # noqa: E402
from .amp import CPUAmpOptimWrapper  # noqa: E402  (imports mmseg: after the fixes above)
from .distributed import setup_cpu_distributed  # noqa: E402

mmseg_inferencer.install()  # imports mmseg.apis: after the fixes above

__all__ = [
    "MMCV_OPS_REPLACED",
    "PKG_RESOURCES_REPLACED",
    "require_mmcv",
    "CPUAmpOptimWrapper",
    "setup_cpu_distributed",
]
