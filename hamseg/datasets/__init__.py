"""The data checks, Context Shapes and the release's training rescale that hamseg registers."""

from .context_shapes import ContextShapesDataset
from .release_rescale import HamReleaseRescale

__all__ = ["ContextShapesDataset", "HamReleaseRescale"]
