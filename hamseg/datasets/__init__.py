"""The data checks, the Context Shapes demo dataset and the release's training rescale that hamseg
registers into mmseg."""

from .context_shapes import ContextShapesDataset
from .release_rescale import HamReleaseRescale

__all__ = ["ContextShapesDataset", "HamReleaseRescale"]
