"""hamseg: the Hamburger global-context module (ICLR 2021) as an mmsegmentation 1.x plugin.

``import hamseg`` adapts the installed stack (:mod:`hamseg.compat`), then registers hamseg's
modules into mmseg's registries (scope 'hamseg': :mod:`hamseg.registry`). On mmcv-lite it must
come before ``import mmseg.models``.
"""

from . import compat  # noqa: I001  (must run before anything imports mmseg)
from . import datasets, engine, evaluation, models, registry
from .version import __version__

__all__ = ["compat", "datasets", "engine", "evaluation", "models", "registry", "__version__"]
