"""Datasets, transforms and data checks that hamseg registers into mmseg."""

from .context_shapes import ContextShapesDataset  # noqa: F401,E402
from .transforms import CheckedLoadAnnotations, CheckedLoadImageFromFile  # noqa: F401,E402
