"""The data checks and the Context Shapes demo dataset that hamseg registers into mmseg."""

from .context_shapes import ContextShapesDataset

__all__ = ["ContextShapesDataset"]
