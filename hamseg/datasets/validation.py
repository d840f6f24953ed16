"""A whole dataset, before a long run: the per-sample checks on every sample, every problem listed.

:func:`validate_dataset` checks one split, :func:`validate_splits` every split a config defines
(``tools/validate_dataset.py``): first the config checks
(:func:`~hamseg.datasets.config_checks.check_dataset_paths`), then each sample with
:func:`~hamseg.datasets.samples.check_sample`, with a progress bar.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Optional

from mmengine.config import Config

from hamseg.utils.config import defined_splits, heads, split_datasets

from ..utils.progress_map import map_with_progress
from .config_checks import DatasetNotFoundError, check_dataset_paths
from .samples import SampleCheck, check_sample

__all__ = ["DatasetReport", "validate_dataset", "validate_splits"]


def _pipeline_backends(pipeline: Iterable[dict]) -> tuple[str, str, Optional[int]]:
    """Decode backends and the ignore index the configured loading transforms use."""
    image_backend, label_backend, ignore_index = "cv2", "pillow", None
    for step in pipeline or []:
        kind = str(step.get("type", "")).split(".")[-1]
        if kind in ("LoadImageFromFile", "CheckedLoadImageFromFile"):
            image_backend = step.get("imdecode_backend", image_backend)
        elif kind in ("LoadAnnotations", "CheckedLoadAnnotations"):
            label_backend = step.get("imdecode_backend", label_backend)
            ignore_index = step.get("ignore_index", ignore_index)
    return image_backend, label_backend, ignore_index


def _check_item(item: tuple[str, Optional[str], SampleCheck]) -> list[str]:
    return check_sample(*item)


@dataclass
class DatasetReport:
    """What :func:`validate_dataset` found in one split.

    Attributes:
        split: 'train', 'val' or 'test'.
        num_samples: Samples checked.
        problems: One message per problem, each naming the file; empty if the split is clean.
        same_as: For :func:`validate_splits`: the earlier split whose datasets this split's are
            (mmseg's ``test_dataloader = val_dataloader``); its samples were not read again.
    """

    split: str
    num_samples: int
    problems: list[str]
    same_as: Optional[str] = None

    def summary(self) -> str:
        """One line: 'no problems in N split samples' or 'K problems in N split samples'."""
        if self.same_as:
            return f"{self.split}: the {self.same_as} samples (checked above)"
        count = f"{len(self.problems)} problem{'s' * (len(self.problems) != 1)}"
        if not self.problems:
            count = "no problems"
        return f"{count} in {self.num_samples} {self.split} samples"


def validate_dataset(
    cfg: Config,
    split: str = "train",
    workers: int = 1,
    progress: bool = True,
    ignore_index: Optional[int] = None,
) -> DatasetReport:
    """Check every sample of a split and report every problem found.

    First :func:`check_dataset_paths` for the split (raises if a folder is missing), then each
    sample: image and label readable and decodable, same size, label values valid.

    Args:
        cfg: The run's config (hamseg must be imported, so its datasets are registered).
        split: 'train', 'val' or 'test'.
        workers: Processes reading files in parallel.
        progress: Show a tqdm progress bar (on stderr).
        ignore_index: Ignore index of the labels; default: the decode head's (else 255).

    Returns:
        The report: number of samples and one message per problem, each naming the file.

    Raises:
        DatasetNotFoundError: A folder or split file of the split is missing.
        ClassCountError: A head's ``num_classes`` differs from the dataset's class count.
    """
    check_dataset_paths(cfg, (split,))
    return _check_samples(cfg, split, workers, progress, ignore_index)


def validate_splits(
    cfg: Config,
    splits: Optional[Sequence[str]] = None,
    workers: int = 1,
    progress: bool = True,
) -> list[DatasetReport]:
    """:func:`validate_dataset` for several splits, the config checks once for all of them.

    Args:
        cfg: The run's config.
        splits: Which of 'train', 'val', 'test'; default: every split the config defines a
            dataloader for. A split whose datasets equal an earlier split's is not read again
            (its report's ``same_as`` names that split).
        workers: Processes reading files in parallel.
        progress: Show a tqdm progress bar per split (on stderr).

    Returns:
        One report per split, in the order 'train', 'val', 'test'.

    Raises:
        DatasetNotFoundError: A folder or split file of one of the splits is missing, or the
            config has no dataloader for a split asked for.
        ClassCountError: A head's ``num_classes`` differs from a dataset's class count.
    """
    defined = defined_splits(cfg)
    missing = [s for s in splits or () if s not in defined]
    if missing or not defined:
        raise DatasetNotFoundError(
            f"the config has no {' or '.join(missing or ('train', 'val', 'test'))}_dataloader "
            f"with a dataset (it defines: {', '.join(defined) or 'none'})"
        )
    splits = [s for s in defined if not splits or s in splits]
    check_dataset_paths(cfg, splits)
    reports: list[DatasetReport] = []
    seen: list[tuple[str, list[dict]]] = []
    for split in splits:
        data = [
            {k: v for k, v in leaf.items() if k != "pipeline"}
            for _, leaf in split_datasets(cfg, (split,))
        ]
        same = next((name for name, other in seen if other == data), None)
        if same is not None:
            earlier = next(r for r in reports if r.split == same)
            reports.append(DatasetReport(split, earlier.num_samples, [], same_as=same))
            continue
        seen.append((split, data))
        reports.append(_check_samples(cfg, split, workers, progress))
    return reports


def _check_samples(
    cfg: Config, split: str, workers: int, progress: bool, ignore_index: Optional[int] = None
) -> DatasetReport:
    """Every sample of one split, the config checks already done."""
    from mmengine.registry import init_default_scope
    from mmseg.registry import DATASETS

    init_default_scope(cfg.get("default_scope", "mmseg"))
    if ignore_index is None:
        model_heads = list(heads(cfg.get("model")))
        ignore_index = model_heads[0][1].get("ignore_index", 255) if model_heads else 255

    items: list[tuple[str, Optional[str], SampleCheck]] = []
    for _, dataset_cfg in split_datasets(cfg, (split,)):
        dataset_cfg = copy.deepcopy(dict(dataset_cfg))
        image_backend, label_backend, step_ignore = _pipeline_backends(
            dataset_cfg.get("pipeline", [])
        )
        dataset_cfg["pipeline"] = []
        dataset_cfg["lazy_init"] = False
        dataset = DATASETS.build(dataset_cfg)
        num_classes = len(dataset.metainfo["classes"])
        for index in range(len(dataset)):
            info = dataset.get_data_info(index)
            check = SampleCheck(
                num_classes=num_classes,
                ignore_index=ignore_index if step_ignore is None else step_ignore,
                reduce_zero_label=bool(info.get("reduce_zero_label", False)),
                label_map=info.get("label_map") or None,
                image_backend=image_backend,
                label_backend=label_backend,
                backend_args=dataset_cfg.get("backend_args"),
            )
            items.append((info["img_path"], info.get("seg_map_path"), check))

    found = map_with_progress(
        _check_item, items, workers, f"checking {split} samples", "sample", progress
    )
    return DatasetReport(split, len(items), [problem for item in found for problem in item])
