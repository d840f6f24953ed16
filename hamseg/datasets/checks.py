"""Data checks of a config, before anything heavy runs, and of every sample of its splits.

:func:`check_dataset_paths` (tools/train.py, tools/test.py) loads every split through the checked
transforms and checks folders, split files, class counts and label-free splits;
:func:`validate_splits` (tools/validate_dataset.py) then reads every sample. docs/robustness.md.
"""

from __future__ import annotations

import copy
import inspect
import logging
import os.path as osp
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from mmengine.config import Config

from hamseg.utils.config import (
    dataset_classes,
    defined_splits,
    heads,
    split_datasets,
    transform_types,
)
from hamseg.utils.messages import first_items
from hamseg.utils.progress_map import map_with_progress

from . import loading
from .loading import InvalidSampleError, label_problems, read_image, read_label

__all__ = [
    "GET_VOC_TEST",
    "PREPARE_CONTEXT",
    "PREPARE_CONTEXT_SHAPES",
    "PREPARE_VOC_AUG",
    "UPGRADES",
    "ClassCountError",
    "DatasetNotFoundError",
    "DatasetReport",
    "SampleCheck",
    "check_dataset_paths",
    "check_label_free_splits",
    "check_num_classes",
    "check_sample",
    "is_label_free",
    "prepare_hint",
    "use_checked_loaders",
    "validate_dataset",
    "validate_splits",
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
#: mmcv/mmseg loading transform -> hamseg's checked drop-in (same arguments and outputs).
UPGRADES = {
    "LoadImageFromFile": "CheckedLoadImageFromFile",
    "LoadAnnotations": "CheckedLoadAnnotations",
}


class DatasetNotFoundError(FileNotFoundError):
    """A dataset folder or split file named by the config does not exist, or a split without
    labels is asked for them."""


class ClassCountError(ValueError):
    """A head's ``num_classes`` differs from the number of classes of a configured dataset."""


# ------------------------------------------------------------------------------------------
# Every split loads through the checked transforms
# ------------------------------------------------------------------------------------------
def _checked_type(kind: Any) -> Any:
    """The checked drop-in's ``type`` for an unchecked loader's (a scoped name goes to mmseg's
    scope, where hamseg registers; a class to the class), else None."""
    if isinstance(kind, str):
        scope, _, name = kind.rpartition(".")
        if name not in UPGRADES:
            return None
        return f"mmseg.{UPGRADES[name]}" if scope else UPGRADES[name]
    name = getattr(kind, "__name__", None)
    if name in UPGRADES and getattr(kind, "__module__", "").split(".")[0] in ("mmcv", "mmseg"):
        return getattr(loading, UPGRADES[name])
    return None


def _upgrade(node: Any, num_classes: Optional[int], ignore_index: int, done: list[str]) -> None:
    """Replace the unchecked loaders in a pipeline (nested lists/dicts too), in place."""
    if isinstance(node, (list, tuple)):
        for value in node:
            _upgrade(value, num_classes, ignore_index, done)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind in ("CheckedLoadAnnotations", "mmseg.CheckedLoadAnnotations"):
        if node.get("num_classes") is None and num_classes is not None:
            node["num_classes"] = num_classes
            node.setdefault("ignore_index", ignore_index)
            done.append(f"CheckedLoadAnnotations(num_classes={num_classes}, from the decode head)")
        return
    new = _checked_type(kind)
    if new is None:
        for value in node.values():
            _upgrade(value, num_classes, ignore_index, done)
        return
    old = (kind if isinstance(kind, str) else kind.__name__).rpartition(".")[2]
    if old == "LoadAnnotations":
        if num_classes is None:
            return  # nothing to check the values against: keep mmseg's loader
        node["num_classes"] = num_classes
        node.setdefault("ignore_index", ignore_index)
        args = f"(num_classes={num_classes}, ignore_index={node['ignore_index']})"
        done.append(f"{old} -> {UPGRADES[old]}{args}")
    else:
        done.append(f"{old} -> {UPGRADES[old]}")
    node["type"] = new


def use_checked_loaders(cfg: Config, splits: Optional[Sequence[str]] = None) -> list[str]:
    """Make the splits' pipelines load with the checked transforms, in place.

    ``LoadImageFromFile`` / ``LoadAnnotations`` (nested ones too) become the checked drop-ins
    with the same arguments; the label loader, and a ``CheckedLoadAnnotations`` without
    ``num_classes``, get the decode head's ``num_classes`` / ``ignore_index`` (else the dataset's
    class count and 255). Logs one info line when anything was replaced.

    Args:
        cfg: The run's config.
        splits: Which of 'train', 'val', 'test'; default: every dataloader the config defines.

    Returns:
        One entry per replaced transform: '<split>: <old> -> <new>[(num_classes=N, ...)]'.
    """
    found = list(heads(cfg.get("model")))
    replaced: list[str] = []
    for split, dataset_cfg in split_datasets(cfg, splits):
        if found:
            head = found[0][1]
            num_classes, ignore_index = int(head["num_classes"]), int(head.get("ignore_index", 255))
        else:
            classes = dataset_classes(dataset_cfg)
            num_classes, ignore_index = (len(classes) if classes else None), 255
        done: list[str] = []
        _upgrade(dataset_cfg.get("pipeline"), num_classes, ignore_index, done)
        replaced += [f"{split}: {change}" for change in done]
    if replaced:
        from mmengine.logging import print_log

        where = dict.fromkeys(entry.split(": ", 1)[0] for entry in replaced)
        changes = dict.fromkeys(entry.split(": ", 1)[1] for entry in replaced)
        print_log(
            f"{', '.join(where)} data: loading with hamseg's checked transforms, same arguments "
            f"({'; '.join(changes)}): a missing or corrupt file or a bad label value stops with "
            "one line naming the file.",
            logger="current",
            level=logging.INFO,
        )
    return replaced


# ------------------------------------------------------------------------------------------
# Config checks
# ------------------------------------------------------------------------------------------
def prepare_hint(dataset_cfg: dict, path: str) -> str:
    """The command (or document) that prepares the dataset a missing ``path`` belongs to."""
    kind = str(dataset_cfg.get("type", ""))
    text = " ".join(
        str(v) for v in (kind, dataset_cfg.get("data_root", ""), dataset_cfg.get("ann_file", ""))
    )
    text = f"{text} {path}".lower().replace("\\", "/")
    voc = "voc" in text or kind == "PascalVOCDataset"
    if "context_shapes" in text or kind == "ContextShapesDataset":
        return f"Generate it with: {PREPARE_CONTEXT_SHAPES}"
    if "voc2010" in text or "pascalcontext" in kind.lower():
        return (
            f"Prepare it with: {PREPARE_CONTEXT} (after downloading VOC2010 and the Context "
            "annotations as described in data/README.md)"
        )
    if voc and is_label_free(dataset_cfg):
        return f"{GET_VOC_TEST}."
    if voc:
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
    """True for a split without labels (VOC 2012 test): a ``data_prefix`` without seg_map_path
    (mmseg's default ``data_prefix`` means labels at ``data_root``)."""
    prefix = dataset_cfg.get("data_prefix")
    return isinstance(prefix, dict) and "seg_map_path" not in prefix


def _required_paths(dataset_cfg: dict) -> list[tuple[str, str]]:
    """(what, path) pairs a dataset config needs, data_root first; relative paths are joined
    with ``data_root`` (mmengine's rule)."""
    data_root = dataset_cfg.get("data_root") or None

    def resolve(path: str) -> str:
        path = osp.expanduser(path)
        return osp.join(data_root, path) if data_root and not osp.isabs(path) else path

    paths = [("data_root folder", osp.expanduser(data_root))] if data_root else []
    for key, value in (dataset_cfg.get("data_prefix") or {}).items():
        if isinstance(value, str) and value:
            paths.append((f"{key} folder", resolve(value)))
    ann_file = dataset_cfg.get("ann_file")
    if isinstance(ann_file, str) and ann_file:
        paths.append(("split file (ann_file)", resolve(ann_file)))
    return paths


def check_dataset_paths(cfg: Config, splits: Optional[Sequence[str]] = None) -> None:
    """:func:`use_checked_loaders`, then check that every dataset folder and split file exists,
    then :func:`check_num_classes` and :func:`check_label_free_splits`.

    Args:
        cfg: The run's config (its pipelines are changed in place).
        splits: Which of 'train', 'val', 'test'; default: every dataloader the config defines.

    Raises:
        DatasetNotFoundError: Naming every missing path of the first dataset with one, and the
            command that prepares it (VOC 2012 test: where to download it); or a split without
            labels would load or evaluate labels.
        ClassCountError: ``num_classes`` of a head differs from the number of dataset classes.
    """
    use_checked_loaders(cfg, splits)
    for split, dataset_cfg in split_datasets(cfg, splits):
        missing = []
        for what, path in _required_paths(dataset_cfg):
            if not (osp.isfile(path) if what.startswith("split") else osp.isdir(path)):
                missing.append(f"{what} {path}")
                if what == "data_root folder":
                    break  # everything below it is missing too
        if missing:
            raise DatasetNotFoundError(
                f"{split}_dataloader ({dataset_cfg.get('type', 'dataset')}, "
                f"data_root={dataset_cfg.get('data_root')!r}): not found: "
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
        return inspect.signature(metric_cls).parameters["format_only"].default is True
    except (TypeError, ValueError, KeyError):
        return False


def check_label_free_splits(cfg: Config, splits: Optional[Sequence[str]] = None) -> None:
    """A split without labels (:func:`is_label_free`) must neither load nor evaluate labels
    (mmseg would fail at the first image with a KeyError).

    Raises:
        DatasetNotFoundError: The pipeline loads annotations, or a metric of the split's
            evaluator is not ``format_only``.
    """
    for split, dataset_cfg in split_datasets(cfg, splits):
        if not is_label_free(dataset_cfg):
            continue
        where = f"{split}_dataloader ({dataset_cfg.get('type', 'dataset')}) has no labels"
        where += " (data_prefix without seg_map_path)"
        loads = sorted(
            set(transform_types(dataset_cfg.get("pipeline", [])))
            & {"LoadAnnotations", "CheckedLoadAnnotations"}
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
    """Every head's ``num_classes`` and a top-level ``classes`` variable (the custom template's)
    against the classes of the configured datasets.

    A child config of the template that sets ``classes`` alone changes nothing (mmengine
    evaluated the template's dataloaders and head from its own ``classes``): that is refused.

    Raises:
        ClassCountError: Naming the head or the variable, the dataset and its classes.
    """
    model_heads = list(heads(cfg.get("model")))
    variable = cfg.get("classes")
    for split, dataset_cfg in split_datasets(cfg, splits):
        classes = dataset_classes(dataset_cfg)
        if classes is None:
            continue
        if isinstance(variable, (list, tuple)) and tuple(variable) != tuple(classes):
            raise ClassCountError(
                f"the config sets classes=({first_items(variable, 6)}) but the "
                f"{split}_dataloader dataset has classes=({first_items(classes, 6)}): a child "
                "config that changes the classes sets model.decode_head.num_classes and each "
                "dataloader's dataset.metainfo, as "
                "configs/custom/hamhead-nmf_r18-d8_custom-classes.py does (docs/custom_dataset.md)"
            )
        for name, head in model_heads:
            if head["num_classes"] != len(classes):
                raise ClassCountError(
                    f"model.{name}.num_classes={head['num_classes']} but the "
                    f"{split}_dataloader dataset ({dataset_cfg.get('type')}) has "
                    f"{len(classes)} classes ({first_items(classes, 6)}). Set "
                    f"num_classes={len(classes)} or change the dataset's metainfo classes."
                )


# ------------------------------------------------------------------------------------------
# Every sample
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SampleCheck:
    """Settings of the per-sample check (picklable, for worker processes)."""

    num_classes: int
    ignore_index: int = 255
    reduce_zero_label: bool = False
    label_map: Optional[dict] = None
    image_backend: str = "cv2"
    label_backend: str = "pillow"
    backend_args: Optional[dict] = None


def check_sample(img_path: str, seg_map_path: Optional[str], check: SampleCheck) -> list[str]:
    """Every problem of one sample, each a full sentence naming the file; [] if it is fine."""
    problems, image = [], None
    try:
        image = read_image(img_path, backend=check.image_backend, backend_args=check.backend_args)
    except InvalidSampleError as err:
        problems.append(str(err))
    if seg_map_path is None:
        return problems
    try:
        raw = read_label(seg_map_path, check.label_backend, check.backend_args)
    except InvalidSampleError as err:
        return [*problems, str(err)]
    shape = None if image is None else image.shape
    _, found = label_problems(
        raw, check.num_classes, check.ignore_index, check.reduce_zero_label, check.label_map, shape
    )
    return problems + [f"label file {seg_map_path!r}: {p} (image {img_path!r})" for p in found]


def _check_item(item: tuple[str, Optional[str], SampleCheck]) -> list[str]:
    return check_sample(*item)


@dataclass
class DatasetReport:
    """What the scan found in one split: samples checked, one message per problem (naming the
    file), and ``same_as``: the earlier split with the same datasets (not read again)."""

    split: str
    num_samples: int
    problems: list[str]
    same_as: Optional[str] = None

    def summary(self) -> str:
        """One line: 'no problems in N split samples' or 'K problems in N split samples'."""
        if self.same_as:
            return f"{self.split}: the {self.same_as} samples (checked above)"
        n = len(self.problems)
        count = f"{n} problem{'s' * (n != 1)}" if n else "no problems"
        return f"{count} in {self.num_samples} {self.split} samples"


def validate_splits(
    cfg: Config,
    splits: Optional[Sequence[str]] = None,
    workers: int = 1,
    progress: bool = True,
) -> list[DatasetReport]:
    """:func:`check_dataset_paths`, then every sample of the splits (:func:`check_sample`).

    Args:
        cfg: The run's config (hamseg imported, so its datasets are registered).
        splits: Which of 'train', 'val', 'test'; default: every split the config defines. A split
            whose datasets equal an earlier one's is not read again (``same_as``).
        workers: Processes reading files in parallel.
        progress: A tqdm progress bar per split (on stderr).

    Returns:
        One report per split, in the order 'train', 'val', 'test'.

    Raises:
        DatasetNotFoundError: A folder or split file is missing, or the config has no
            dataloader for a split asked for.
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
        same = next((report for report, (_, other) in zip(reports, seen) if other == data), None)
        seen.append((split, data))
        if same is not None:
            reports.append(DatasetReport(split, same.num_samples, [], same_as=same.split))
        else:
            reports.append(_check_samples(cfg, split, workers, progress))
    return reports


def validate_dataset(
    cfg: Config, split: str = "train", workers: int = 1, progress: bool = True
) -> DatasetReport:
    """:func:`validate_splits` for one split: its report."""
    return validate_splits(cfg, (split,), workers, progress)[0]


def _check_samples(cfg: Config, split: str, workers: int, progress: bool) -> DatasetReport:
    """Every sample of one split, the config checks done. Decode backends and ignore index are
    the split's loading transforms' (else the decode head's ignore index, else 255)."""
    from mmengine.registry import init_default_scope
    from mmseg.registry import DATASETS

    init_default_scope(cfg.get("default_scope", "mmseg"))
    model_heads = list(heads(cfg.get("model")))
    head_ignore = model_heads[0][1].get("ignore_index", 255) if model_heads else 255
    items: list[tuple[str, Optional[str], SampleCheck]] = []
    for _, dataset_cfg in split_datasets(cfg, (split,)):
        dataset_cfg = copy.deepcopy(dict(dataset_cfg))
        image_backend, label_backend, ignore_index = "cv2", "pillow", head_ignore
        for step in dataset_cfg.get("pipeline") or []:
            kind = str(step.get("type", "")).split(".")[-1]
            if kind in ("LoadImageFromFile", "CheckedLoadImageFromFile"):
                image_backend = step.get("imdecode_backend", image_backend)
            elif kind in ("LoadAnnotations", "CheckedLoadAnnotations"):
                label_backend = step.get("imdecode_backend", label_backend)
                ignore_index = step.get("ignore_index", ignore_index)
        dataset_cfg.update(pipeline=[], lazy_init=False)
        dataset = DATASETS.build(dataset_cfg)
        num_classes = len(dataset.metainfo["classes"])
        for index in range(len(dataset)):
            info = dataset.get_data_info(index)
            check = SampleCheck(
                num_classes=num_classes,
                ignore_index=ignore_index,
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
