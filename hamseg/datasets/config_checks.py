"""Config checks, before the Runner is built: the datasets exist and fit the model.

:func:`check_dataset_paths` (called by tools/train.py, tools/test.py and
tools/validate_dataset.py) first loads every split through the checked transforms
(:func:`~hamseg.datasets.checked_loaders.use_checked_loaders`), then checks that every dataset
folder and split file of the config exists, with the command that prepares a missing one
(:class:`DatasetNotFoundError`); that the config's ``num_classes`` agrees with the dataset's
classes (:class:`ClassCountError`); and that a split without labels (VOC 2012 test) neither
loads nor evaluates labels.
"""

from __future__ import annotations

import inspect
import os.path as osp
from collections.abc import Sequence
from typing import Any, Optional

from mmengine.config import Config

from hamseg.utils.config import dataset_classes, heads, split_datasets, transform_types
from hamseg.utils.messages import first_items

from .checked_loaders import use_checked_loaders

__all__ = [
    "GET_VOC_TEST",
    "LOAD_ANNOTATIONS",
    "PREPARE_CONTEXT",
    "PREPARE_CONTEXT_SHAPES",
    "PREPARE_VOC_AUG",
    "ClassCountError",
    "DatasetNotFoundError",
    "check_dataset_paths",
    "check_label_free_splits",
    "check_num_classes",
    "is_label_free",
    "prepare_hint",
]

#: Exact commands that prepare each known dataset (run from the repository root).
PREPARE_VOC_AUG = "python tools/dataset_converters/voc_aug.py data/VOCdevkit data/VOCdevkit/VOCaug"
PREPARE_CONTEXT = (
    "python tools/dataset_converters/pascal_context.py data/VOCdevkit "
    "data/VOCdevkit/VOC2010/trainval_merged.json"
)
PREPARE_CONTEXT_SHAPES = "python tools/dataset_converters/generate_context_shapes.py"
#: The VOC 2012 test images come only from the VOC evaluation server (no converter).
GET_VOC_TEST = (
    "Download VOC2012test.tar from the PASCAL VOC evaluation server (after registering) and "
    "extract it with `tar -xf VOC2012test.tar -C data/` (it adds VOCdevkit/VOC2012/JPEGImages "
    "and ImageSets/Segmentation/test.txt; data/README.md)"
)
LOAD_ANNOTATIONS = ("LoadAnnotations", "CheckedLoadAnnotations")


class DatasetNotFoundError(FileNotFoundError):
    """A dataset folder or split file named by the config does not exist, or a split without
    labels is asked for them."""


class ClassCountError(ValueError):
    """A head's ``num_classes`` differs from the number of classes of a configured dataset."""


def prepare_hint(dataset_cfg: dict, path: str) -> str:
    """The command (or document) that prepares the dataset a missing ``path`` belongs to."""
    kind = str(dataset_cfg.get("type", ""))
    text = " ".join(
        str(v) for v in (kind, dataset_cfg.get("data_root", ""), dataset_cfg.get("ann_file", ""))
    )
    text = f"{text} {path}".lower().replace("\\", "/")
    if "context_shapes" in text or kind == "ContextShapesDataset":
        return f"Generate it with: {PREPARE_CONTEXT_SHAPES}"
    if "voc2010" in text or "pascalcontext" in kind.lower():
        return (
            f"Prepare it with: {PREPARE_CONTEXT} (after downloading VOC2010 and the Context "
            "annotations as described in data/README.md)"
        )
    if ("voc" in text or kind == "PascalVOCDataset") and is_label_free(dataset_cfg):
        return f"{GET_VOC_TEST}."
    if "voc" in text or kind == "PascalVOCDataset":
        return (
            f"Prepare it with: {PREPARE_VOC_AUG} (after downloading VOC2012 and SBD as "
            "described in data/README.md)"
        )
    if "ade" in kind.lower() or "adechallenge" in text:
        return (
            "Download ADEChallengeData2016.zip (MIT Scene Parsing) and unzip it into data/ade/ "
            "(data/README.md, ADE20K)."
        )
    if kind in ("BaseSegDataset", ""):  # the custom templates: the user's own data
        return (
            "Put your images and label maps there in the layout the config names, or point "
            "data_root at them (--cfg-options data_root=PATH); docs/custom_dataset.md."
        )
    return "See data/README.md for how to download and prepare the datasets."


def is_label_free(dataset_cfg: dict) -> bool:
    """True for a split without labels (e.g. VOC 2012 test): ``data_prefix`` has no seg_map_path.

    mmseg's datasets default to ``data_prefix=dict(img_path='', seg_map_path='')``, i.e. labels
    at ``data_root``; only a ``data_prefix`` given without ``seg_map_path`` means no labels.
    """
    prefix = dataset_cfg.get("data_prefix")
    return isinstance(prefix, dict) and "seg_map_path" not in prefix


def _resolve(path: str, data_root: Optional[str]) -> str:
    """mmengine's rule: a relative path is joined with ``data_root`` when there is one."""
    path = osp.expanduser(path)
    if data_root and not osp.isabs(path):
        return osp.join(data_root, path)
    return path


def _required_paths(dataset_cfg: dict) -> list[tuple[str, str]]:
    """(what, path) pairs a dataset config needs, data_root first."""
    data_root = dataset_cfg.get("data_root") or None
    paths: list[tuple[str, str]] = []
    if data_root:
        paths.append(("data_root folder", osp.expanduser(data_root)))
    for key, value in (dataset_cfg.get("data_prefix") or {}).items():
        if isinstance(value, str) and value:
            paths.append((f"{key} folder", _resolve(value, data_root)))
    ann_file = dataset_cfg.get("ann_file")
    if isinstance(ann_file, str) and ann_file:
        paths.append(("split file (ann_file)", _resolve(ann_file, data_root)))
    return paths


def check_dataset_paths(cfg: Config, splits: Optional[Sequence[str]] = None) -> None:
    """Load through the checked transforms, check that every dataset folder and split file
    exists, then :func:`check_num_classes` and :func:`check_label_free_splits`.

    The config is changed in place: mmcv/mmseg's ``LoadImageFromFile`` / ``LoadAnnotations`` of
    the checked splits become hamseg's checked drop-ins, with the same arguments
    (:func:`~hamseg.datasets.checked_loaders.use_checked_loaders`, one info line).

    Args:
        cfg: The run's config.
        splits: Which of 'train', 'val', 'test' to check; default: every dataloader the config
            defines. ``tools/test.py`` may pass ``('test',)``.

    Raises:
        DatasetNotFoundError: Naming every missing path of the first dataset with a missing
            one, and the command that prepares it (for the label-free VOC 2012 test split:
            where to download it); or a split without labels would load or evaluate labels.
        ClassCountError: ``num_classes`` of a head differs from the number of dataset classes.
    """
    use_checked_loaders(cfg, splits)
    for split, dataset_cfg in split_datasets(cfg, splits):
        data_root = dataset_cfg.get("data_root")
        missing = []
        for what, path in _required_paths(dataset_cfg):
            exists = osp.isfile(path) if what.startswith("split") else osp.isdir(path)
            if not exists:
                missing.append(f"{what} {path}")
                if what == "data_root folder":
                    break  # everything below it is missing too
        if missing:
            kind = dataset_cfg.get("type", "dataset")
            raise DatasetNotFoundError(
                f"{split}_dataloader ({kind}, data_root={data_root!r}): not found: "
                f"{'; '.join(missing)}. {prepare_hint(dataset_cfg, missing[0])}"
            )
    check_num_classes(cfg, splits)
    check_label_free_splits(cfg, splits)


def _evaluators(cfg: Config, split: str) -> list[dict]:
    evaluator = cfg.get(f"{split}_evaluator")
    if isinstance(evaluator, dict) and "metrics" in evaluator:  # Evaluator(metrics=[...])
        evaluator = evaluator["metrics"]
    if isinstance(evaluator, dict):
        return [evaluator]
    return [e for e in evaluator or [] if isinstance(e, dict)]


def _format_only(metric: dict) -> bool:
    """The metric's ``format_only``, with the registered class's default if not set."""
    if "format_only" in metric:
        return bool(metric["format_only"])

    from mmseg.registry import METRICS

    kind = metric.get("type")
    metric_cls = METRICS.get(kind.split(".")[-1]) if isinstance(kind, str) else kind
    try:
        default = inspect.signature(metric_cls).parameters["format_only"].default
    except (TypeError, ValueError, KeyError):
        return False
    return default is True


def check_label_free_splits(cfg: Config, splits: Optional[Sequence[str]] = None) -> None:
    """A split without labels (:func:`is_label_free`) must neither load nor evaluate labels.

    Otherwise mmseg fails at the first image with a KeyError ('seg_map_path', 'gt_sem_seg').

    Raises:
        DatasetNotFoundError: The pipeline loads annotations, or a metric of the split's
            evaluator is not ``format_only`` (it would compare with labels).
    """
    for split, dataset_cfg in split_datasets(cfg, splits):
        if not is_label_free(dataset_cfg):
            continue
        where = f"{split}_dataloader ({dataset_cfg.get('type', 'dataset')}) has no labels"
        where += " (data_prefix without seg_map_path)"
        loads = sorted(
            set(transform_types(dataset_cfg.get("pipeline", []))) & set(LOAD_ANNOTATIONS)
        )
        if loads:
            raise DatasetNotFoundError(
                f"{where} but its pipeline loads them ({', '.join(loads)}; with --tta the "
                "config's tta_pipeline). Use a pipeline without annotations, e.g. "
                "label_free_test_pipeline / label_free_tta_pipeline of "
                "configs/_base_/datasets/voc12aug_hamnet.py."
            )
        for metric in _evaluators(cfg, split):
            if not _format_only(metric):
                raise DatasetNotFoundError(
                    f"{where} but {split}_evaluator {metric.get('type')} compares with labels. "
                    "Set format_only=True (only write the predictions), e.g. "
                    "VOCSubmissionMetric as in configs/ham_voc_test.py."
                )


def check_num_classes(cfg: Config, splits: Optional[Sequence[str]] = None) -> None:
    """Check every head's ``num_classes`` against the classes of the configured datasets, and
    a top-level ``classes`` variable (the custom template's) against them too.

    A child config of the template that sets ``classes`` alone changes nothing: the template's
    dataloaders and head were computed from its own ``classes`` when it was read (mmengine
    evaluates each file once). That is refused instead of training on the old classes.

    Args:
        cfg: The run's config.
        splits: As for :func:`check_dataset_paths`.

    Raises:
        ClassCountError: Naming the head, its ``num_classes``, the dataset and its class count;
            or the ``classes`` variable and the dataset's classes, when they differ.
    """
    model_heads = list(heads(cfg.get("model")))
    variable = cfg.get("classes")
    for split, dataset_cfg in split_datasets(cfg, splits):
        classes = dataset_classes(dataset_cfg)
        if classes is None:
            continue
        if isinstance(variable, (list, tuple)) and tuple(variable) != tuple(classes):
            raise ClassCountError(
                f"the config sets classes={_shown(variable)} but the {split}_dataloader dataset "
                f"has classes={_shown(classes)}: a child config that changes the classes sets "
                "model.decode_head.num_classes and each dataloader's dataset.metainfo, as "
                "configs/custom/hamhead-nmf_r18-d8_custom-classes.py does (docs/custom_dataset.md)"
            )
        for name, head in model_heads:
            if head["num_classes"] != len(classes):
                raise ClassCountError(
                    f"model.{name}.num_classes={head['num_classes']} but the "
                    f"{split}_dataloader dataset ({dataset_cfg.get('type')}) has "
                    f"{len(classes)} classes {_shown(classes)}. Set "
                    f"num_classes={len(classes)} or change the dataset's metainfo classes."
                )


def _shown(classes: Sequence[Any]) -> str:
    """At most six class names, for a message: '(a, b, ...)'."""
    return f"({first_items(classes, 6)})"
