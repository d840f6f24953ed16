"""Datasets, checked loading and data checks that hamseg registers into mmseg."""

from .checks import (
    ClassCountError,
    DatasetNotFoundError,
    DatasetReport,
    check_dataset_paths,
    use_checked_loaders,
    validate_dataset,
    validate_splits,
)
from .context_shapes import ContextShapesDataset
from .loading import (
    CheckedLoadAnnotations,
    CheckedLoadImageFromFile,
    InvalidSampleError,
    read_image,
    read_image_rgb,
    read_label,
)

__all__ = [
    "CheckedLoadAnnotations",
    "CheckedLoadImageFromFile",
    "ClassCountError",
    "ContextShapesDataset",
    "DatasetNotFoundError",
    "DatasetReport",
    "InvalidSampleError",
    "check_dataset_paths",
    "read_image",
    "read_image_rgb",
    "read_label",
    "use_checked_loaders",
    "validate_dataset",
    "validate_splits",
]
