"""hamseg: the Hamburger global-context module (ICLR 2021) as an mmsegmentation 1.x plugin.

``import hamseg`` first adapts the installed stack (:mod:`hamseg.compat`), then registers every
model, dataset, transform, engine piece and metric hamseg defines into mmseg's registries.
"""

from . import compat  # noqa: I001  (must run before anything imports mmseg)
from . import datasets, engine, evaluation, models

__version__ = "0.1.0"

__all__ = ["compat", "datasets", "engine", "evaluation", "models", "__version__"]
