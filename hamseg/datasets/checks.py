"""Data checks: fail fast with one clear message instead of days into a run.

Three levels, all naming the file and the problem (one module each; every name is importable
from here):

- The config (:mod:`~hamseg.datasets.config_checks`, :func:`check_dataset_paths`, called by
  tools/train.py, tools/test.py and tools/validate_dataset.py before anything heavy runs): every
  split loads through the checked transforms (mmcv/mmseg's ``LoadImageFromFile`` /
  ``LoadAnnotations`` are upgraded to them, :mod:`~hamseg.datasets.checked_loaders`); every
  dataset folder and split file exists, with the command that prepares a missing one
  (:class:`DatasetNotFoundError`); the config's ``num_classes`` agrees with the dataset's classes
  (:class:`ClassCountError`); a split without labels (VOC 2012 test) is accepted, but its
  pipeline must not load labels nor its evaluator compare with them.
- Per sample, while a run loads data (:mod:`~hamseg.datasets.samples`, used by
  :mod:`hamseg.datasets.transforms`): an unreadable or corrupt image or label file, a label of
  another size than its image, label values outside ``[0, num_classes)`` that are not the ignore
  index (:class:`InvalidSampleError`), raised by the data loader at the first batch that holds
  the sample.
- Whole dataset, before a long run (:mod:`~hamseg.datasets.validation`,
  :func:`validate_dataset`, ``tools/validate_dataset.py``): the same per-sample checks on every
  sample, with a progress bar, listing every problem.
"""

from __future__ import annotations

from hamseg.utils.config import SPLITS, defined_splits, leaf_datasets

from .checked_loaders import UPGRADES, use_checked_loaders
from .config_checks import (
    GET_VOC_TEST,
    LOAD_ANNOTATIONS,
    PREPARE_CONTEXT,
    PREPARE_CONTEXT_SHAPES,
    PREPARE_VOC_AUG,
    ClassCountError,
    DatasetNotFoundError,
    check_dataset_paths,
    check_label_free_splits,
    check_num_classes,
    is_label_free,
    prepare_hint,
)
from .samples import (
    InvalidSampleError,
    SampleCheck,
    check_sample,
    label_problems,
    read_image,
    read_label,
)
from .validation import DatasetReport, validate_dataset, validate_splits

__all__ = [
    "GET_VOC_TEST",
    "LOAD_ANNOTATIONS",
    "PREPARE_CONTEXT",
    "PREPARE_CONTEXT_SHAPES",
    "PREPARE_VOC_AUG",
    "SPLITS",
    "UPGRADES",
    "ClassCountError",
    "DatasetNotFoundError",
    "DatasetReport",
    "InvalidSampleError",
    "SampleCheck",
    "check_dataset_paths",
    "check_label_free_splits",
    "check_num_classes",
    "check_sample",
    "defined_splits",
    "is_label_free",
    "label_problems",
    "leaf_datasets",
    "prepare_hint",
    "read_image",
    "read_label",
    "use_checked_loaders",
    "validate_dataset",
    "validate_splits",
]
