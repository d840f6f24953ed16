"""hamseg: the Hamburger (ICLR 2021) as an mmsegmentation 1.x plugin. ``import hamseg`` adapts the
stack (:mod:`hamseg.compat`; before ``import mmseg.models``) and registers hamseg's modules."""

from . import compat  # noqa: I001  (must run before anything imports mmseg)
from . import datasets, engine, evaluation, models, registry
from .version import __version__

__all__ = ["compat", "datasets", "engine", "evaluation", "models", "registry", "__version__"]
