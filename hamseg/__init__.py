"""hamseg: the Hamburger global-context module (ICLR 2021) as an mmsegmentation 1.x plugin.

``import hamseg`` first adapts the installed stack (:mod:`hamseg.compat`), then registers every
model, dataset, transform, engine piece and metric hamseg defines into mmseg's registries (scope
'hamseg' has its own nodes: :mod:`hamseg.registry`). On an mmcv-lite stack it must come before any
``import mmseg.apis`` / ``mmseg.models`` (docs/ecosystem.md has an opt-in startup line).
"""

from . import compat  # noqa: I001  (must run before anything imports mmseg)
from . import datasets, engine, evaluation, models, registry
from .version import __version__

__all__ = ["compat", "datasets", "engine", "evaluation", "models", "registry", "__version__"]
