"""Data checks: fail fast with one clear message instead of days into a run.

Three levels, all naming the file and the problem:

- :func:`check_dataset_paths` (called by tools/train.py and tools/test.py before the Runner is
  built): every dataset folder and split file of the config exists, with the command that
  prepares a missing one (:class:`DatasetNotFoundError`); the config's ``num_classes`` agrees
  with the dataset's classes (``ValueError``); a split without labels (VOC 2012 test) is
  accepted, but its pipeline must not load labels nor its evaluator compare with them.
- Per sample, while training (:mod:`hamseg.datasets.transforms`): an unreadable or corrupt
  image or label file, a label of another size than its image, label values outside
  ``[0, num_classes)`` that are not the ignore index (:class:`InvalidSampleError`), raised by
  the data loader at the first batch that holds the sample.
- Whole dataset, before a long run (:func:`validate_dataset`, ``tools/validate_dataset.py``):
  the same per-sample checks on every sample, with a progress bar, listing every problem.
"""

from __future__ import annotations

import copy
import logging
import os.path as osp
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing import get_all_start_methods, get_context
from typing import Any, Optional

import mmcv
import numpy as np
from mmengine import fileio
from mmengine.config import Config

__all__ = [
    "ClassCountError",
    "DatasetNotFoundError",
    "InvalidSampleError",
    "DatasetReport",
    "SampleCheck",
    "check_dataset_paths",
    "check_label_free_splits",
    "check_num_classes",
    "check_sample",
    "is_label_free",
    "label_problems",
    "leaf_datasets",
    "prepare_hint",
    "read_image",
    "read_label",
    "validate_dataset",
]

SPLITS = ("train", "val", "test")

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


class InvalidSampleError(ValueError):
    """An image or label file is missing, unreadable, corrupt or inconsistent.

    The message names the file(s) and the problem. Constructed from the message alone, so the
    error keeps its type when a DataLoader worker re-raises it in the main process.
    """


# ------------------------------------------------------------------------------------------
# Paths and classes of a config
# ------------------------------------------------------------------------------------------
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


def leaf_datasets(dataset_cfg: Any) -> Iterator[dict]:
    """The dataset configs inside wrappers (RepeatDataset, ConcatDataset, ...)."""
    if isinstance(dataset_cfg, dict):
        if "dataset" in dataset_cfg:
            yield from leaf_datasets(dataset_cfg["dataset"])
        elif "datasets" in dataset_cfg:
            for inner in dataset_cfg["datasets"]:
                yield from leaf_datasets(inner)
        else:
            yield dataset_cfg
    elif isinstance(dataset_cfg, (list, tuple)):
        for inner in dataset_cfg:
            yield from leaf_datasets(inner)


def _split_datasets(cfg: Config, splits: Optional[Sequence[str]]) -> Iterator[tuple[str, dict]]:
    for split in splits or SPLITS:
        loader = cfg.get(f"{split}_dataloader")
        if not loader or not loader.get("dataset"):
            continue
        for leaf in leaf_datasets(loader["dataset"]):
            yield split, leaf


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
    """Check that every dataset folder and split file exists, then :func:`check_num_classes`
    and :func:`check_label_free_splits`.

    Args:
        cfg: The run's config.
        splits: Which of 'train', 'val', 'test' to check; default: every dataloader the config
            defines. ``tools/test.py`` may pass ``('test',)``.

    Raises:
        DatasetNotFoundError: Naming every missing path of the first dataset with a missing
            one, and the command that prepares it (for the label-free VOC 2012 test split:
            where to download it); or a split without labels would load or evaluate labels.
        ValueError: ``num_classes`` of a head differs from the number of dataset classes.
    """
    for split, dataset_cfg in _split_datasets(cfg, splits):
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
    _warn_unchecked_loaders(cfg, splits)


def _transform_types(node: Any) -> Iterator[str]:
    """Every transform ``type`` in a pipeline, nested ones (TestTimeAug, RandomChoice) too."""
    if isinstance(node, dict):
        if isinstance(node.get("type"), str):
            yield node["type"].split(".")[-1]
        for value in node.values():
            yield from _transform_types(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            yield from _transform_types(value)


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
    import inspect

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
    for split, dataset_cfg in _split_datasets(cfg, splits):
        if not is_label_free(dataset_cfg):
            continue
        where = f"{split}_dataloader ({dataset_cfg.get('type', 'dataset')}) has no labels"
        where += " (data_prefix without seg_map_path)"
        loads = sorted(
            set(_transform_types(dataset_cfg.get("pipeline", []))) & set(LOAD_ANNOTATIONS)
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


def _warn_unchecked_loaders(cfg: Config, splits: Optional[Sequence[str]]) -> None:
    """Warn when a pipeline loads with mmcv/mmseg's unchecked loaders."""
    from mmengine.logging import print_log

    unchecked = {
        "LoadImageFromFile": "CheckedLoadImageFromFile",
        "LoadAnnotations": "CheckedLoadAnnotations",
    }
    for split, dataset_cfg in _split_datasets(cfg, splits):
        found = sorted(set(_transform_types(dataset_cfg.get("pipeline", []))) & set(unchecked))
        if found:
            advice = ", ".join(f"{name} -> {unchecked[name]}" for name in found)
            print_log(
                f"{split}_dataloader loads data with unchecked transforms: a corrupt file or a "
                f"bad label value will not be reported clearly ({advice}; see "
                "docs/robustness.md). `python tools/validate_dataset.py` checks a whole split.",
                logger="current",
                level=logging.WARNING,
            )


def _dataset_classes(dataset_cfg: dict) -> Optional[tuple]:
    metainfo = dataset_cfg.get("metainfo") or {}
    if metainfo.get("classes"):
        return tuple(metainfo["classes"])
    kind = dataset_cfg.get("type")
    if not isinstance(kind, str):
        return None
    from mmseg.registry import DATASETS

    dataset_cls = DATASETS.get(kind.split(".")[-1])
    classes = getattr(dataset_cls, "METAINFO", {}).get("classes") if dataset_cls else None
    return tuple(classes) if classes else None


def _heads(model_cfg: Any) -> Iterator[tuple[str, dict]]:
    """(name, head config) of every decode/auxiliary head, inside TTA wrappers too."""
    if not isinstance(model_cfg, dict):
        return
    if isinstance(model_cfg.get("module"), dict):  # SegTTAModel(module=...)
        yield from _heads(model_cfg["module"])
    for key in ("decode_head", "auxiliary_head"):
        heads = model_cfg.get(key)
        if isinstance(heads, dict):
            heads = [heads]
        for i, head in enumerate(heads or []):
            if isinstance(head, dict) and "num_classes" in head:
                name = key if len(heads) == 1 else f"{key}[{i}]"
                yield name, head


def check_num_classes(cfg: Config, splits: Optional[Sequence[str]] = None) -> None:
    """Check every head's ``num_classes`` against the classes of the configured datasets.

    Args:
        cfg: The run's config.
        splits: As for :func:`check_dataset_paths`.

    Raises:
        ClassCountError: Naming the head, its ``num_classes``, the dataset and its class count.
    """
    heads = list(_heads(cfg.get("model")))
    if not heads:
        return
    for split, dataset_cfg in _split_datasets(cfg, splits):
        classes = _dataset_classes(dataset_cfg)
        if classes is None:
            continue
        for name, head in heads:
            if head["num_classes"] != len(classes):
                shown = ", ".join(map(str, classes[:6])) + (", ..." if len(classes) > 6 else "")
                raise ClassCountError(
                    f"model.{name}.num_classes={head['num_classes']} but the "
                    f"{split}_dataloader dataset ({dataset_cfg.get('type')}) has "
                    f"{len(classes)} classes ({shown}). Set num_classes={len(classes)} or "
                    "change the dataset's metainfo classes."
                )


# ------------------------------------------------------------------------------------------
# One sample
# ------------------------------------------------------------------------------------------
def _read_bytes(path: str, what: str, backend_args: Optional[dict]) -> bytes:
    try:
        data = fileio.get(path, backend_args=backend_args)
    except FileNotFoundError:
        raise InvalidSampleError(f"{what} file {path!r} does not exist") from None
    except (OSError, ValueError) as err:
        raise InvalidSampleError(f"{what} file {path!r} cannot be read: {err}") from None
    if not data:
        raise InvalidSampleError(f"{what} file {path!r} is empty (0 bytes)")
    return data


def _decode(data: bytes, path: str, what: str, flag: str, backend: str) -> np.ndarray:
    reason = ""
    try:
        array = mmcv.imfrombytes(data, flag=flag, backend=backend)
    except Exception as err:  # decoders raise anything from OSError to SyntaxError
        array, reason = None, f": {type(err).__name__}: {err}"
    if array is None or array.size == 0:
        raise InvalidSampleError(
            f"{what} file {path!r} is corrupt or not an image (the {backend} decoder could "
            f"not decode its {len(data)} bytes{reason})"
        )
    return array


def read_image(
    path: str,
    color_type: str = "color",
    backend: str = "cv2",
    backend_args: Optional[dict] = None,
) -> np.ndarray:
    """Read an image as mmcv's ``LoadImageFromFile`` does, or raise :class:`InvalidSampleError`.

    Args:
        path: Image file.
        color_type: mmcv flag ('color', 'grayscale', 'unchanged').
        backend: mmcv decode backend ('cv2', 'pillow', ...).
        backend_args: mmengine file backend arguments.

    Returns:
        The decoded image (H, W[, C]).
    """
    return _decode(_read_bytes(path, "image", backend_args), path, "image", color_type, backend)


def read_label(
    path: str, backend: str = "pillow", backend_args: Optional[dict] = None
) -> np.ndarray:
    """Read a label map with its raw values (no uint8 cast), or raise :class:`InvalidSampleError`.

    Args:
        path: Label file (PNG of class indices, palette PNGs included).
        backend: mmcv decode backend; mmseg's ``LoadAnnotations`` default is 'pillow'.
        backend_args: mmengine file backend arguments.

    Returns:
        The label map, squeezed like mmseg does (normally (H, W)), in its file's integer dtype.
    """
    data = _read_bytes(path, "label", backend_args)
    return _decode(data, path, "label", "unchanged", backend).squeeze()


def _label_lut(reduce_zero_label: bool, label_map: Optional[dict]) -> np.ndarray:
    """Raw value (0..255) -> training label, exactly as mmseg's ``LoadAnnotations`` maps it."""
    lut = np.arange(256, dtype=np.int64)
    if reduce_zero_label:  # 0 -> 255 (ignore), v -> v - 1, 255 stays 255
        lut = np.where(lut == 0, 255, lut - 1)
        lut[lut == 254] = 255
    if label_map:
        source = lut.copy()
        for old, new in label_map.items():
            lut[source == old] = new
    return lut


def label_problems(
    raw: np.ndarray,
    num_classes: int,
    ignore_index: int = 255,
    reduce_zero_label: bool = False,
    label_map: Optional[dict] = None,
    image_shape: Optional[Sequence[int]] = None,
) -> tuple[Optional[np.ndarray], list[str]]:
    """Check a raw label map and map it to training labels.

    Args:
        raw: Label map as read by :func:`read_label`.
        num_classes: Valid labels are ``0 .. num_classes - 1`` ...
        ignore_index: ... and this value.
        reduce_zero_label: The dataset's ``reduce_zero_label`` (0 -> ignore, v -> v - 1).
        label_map: The dataset's ``label_map`` (custom class subsets), applied afterwards.
        image_shape: (H, W[, C]) of the image, to compare sizes; None to skip.

    Returns:
        The uint8 training label map (None if there are problems) and the list of problems.
    """
    problems = []
    if raw.ndim != 2:
        return None, [f"a label map must have one channel, but its shape is {tuple(raw.shape)}"]
    if image_shape is not None and tuple(raw.shape) != tuple(image_shape[:2]):
        problems.append(
            f"label size {raw.shape[0]}x{raw.shape[1]} (HxW) differs from the image size "
            f"{image_shape[0]}x{image_shape[1]}"
        )
    values = np.unique(raw)
    if values.dtype.kind not in "ui":
        values = values.astype(np.int64)
    lut = _label_lut(reduce_zero_label, label_map)
    in_byte = (values >= 0) & (values <= 255)
    mapped = np.where(in_byte, lut[np.clip(values, 0, 255).astype(np.int64)], -1)
    valid = in_byte & (((mapped >= 0) & (mapped < num_classes)) | (mapped == ignore_index))
    bad = values[~valid]
    if bad.size:
        shown = ", ".join(str(int(v)) for v in bad[:20]) + (", ..." if bad.size > 20 else "")
        how = " after reduce_zero_label" if reduce_zero_label else ""
        how += " and label_map" if label_map else ""
        problems.append(
            f"label values [{shown}] are outside [0, {num_classes}){how} and are not the "
            f"ignore index {ignore_index}"
        )
    if problems:
        return None, problems
    return lut[raw.astype(np.int64)].astype(np.uint8), []


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
    problems: list[str] = []
    image = None
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
    _, found = label_problems(
        raw,
        check.num_classes,
        check.ignore_index,
        check.reduce_zero_label,
        check.label_map,
        None if image is None else image.shape,
    )
    problems.extend(f"label file {seg_map_path!r}: {p} (image {img_path!r})" for p in found)
    return problems


# ------------------------------------------------------------------------------------------
# A whole dataset
# ------------------------------------------------------------------------------------------
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
    """What :func:`validate_dataset` found.

    Attributes:
        split: 'train', 'val' or 'test'.
        num_samples: Samples checked.
        problems: One message per problem, each naming the file; empty if the split is clean.
    """

    split: str
    num_samples: int
    problems: list[str]

    def summary(self) -> str:
        """One line: 'no problems in N split samples' or 'K problems in N split samples'."""
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
    """
    from mmengine.registry import init_default_scope
    from mmseg.registry import DATASETS
    from tqdm import tqdm

    check_dataset_paths(cfg, (split,))
    init_default_scope(cfg.get("default_scope", "mmseg"))
    if ignore_index is None:
        heads = list(_heads(cfg.get("model")))
        ignore_index = heads[0][1].get("ignore_index", 255) if heads else 255

    items: list[tuple[str, Optional[str], SampleCheck]] = []
    for _, dataset_cfg in _split_datasets(cfg, (split,)):
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

    problems: list[str] = []
    bar = tqdm(
        total=len(items), desc=f"checking {split} samples", unit="sample", disable=not progress
    )
    try:
        if workers > 1:
            method = "fork" if "fork" in get_all_start_methods() else "spawn"
            with get_context(method).Pool(workers) as pool:
                for found in pool.imap(_check_item, items, chunksize=16):
                    problems.extend(found)
                    bar.update()
        else:
            for item in items:
                problems.extend(_check_item(item))
                bar.update()
    finally:
        bar.close()
    return DatasetReport(split, len(items), problems)
