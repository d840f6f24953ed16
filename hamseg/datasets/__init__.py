"""Datasets and checked loading transforms that hamseg registers into mmseg."""

from .context_shapes import ContextShapesDataset
from .loading import CheckedLoadAnnotations, CheckedLoadImageFromFile
from .release_rescale import HamReleaseRescale

__all__ = [
    "CheckedLoadAnnotations",
    "CheckedLoadImageFromFile",
    "ContextShapesDataset",
    "HamReleaseRescale",
]
