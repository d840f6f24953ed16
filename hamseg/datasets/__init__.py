"""Datasets and checked loading transforms that hamseg registers into mmseg."""

from .context_shapes import ContextShapesDataset
from .loading import CheckedLoadAnnotations, CheckedLoadImageFromFile

__all__ = [
    "CheckedLoadAnnotations",
    "CheckedLoadImageFromFile",
    "ContextShapesDataset",
]
