"""The data checks of a config (:func:`check_dataset_paths`: folders, split files, class counts,
label-free splits) and of every sample of its splits (:func:`validate_splits`: the scan before
iteration 1 and tools/validate_dataset.py). Each problem is one line naming the file or option."""

from __future__ import annotations

import inspect
import io
import os.path as osp
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.utils import track_parallel_progress, track_progress
from mmseg.registry import DATASETS, METRICS

from hamseg.utils.config import (
    dataset_class_metainfo,
    dataset_classes,
    defined_splits,
    heads,
    split_datasets,
    transform_types,
)
from hamseg.utils.errors import first_items, one_line

from .loading import InvalidSampleError, label_problems, read_image

DEVKIT = "data/VOCdevkit"  # where the converters and the configs put each dataset by default
SHAPES = "data/context_shapes"
#: Runner settings that do not change what tools/validate_dataset.py reads.
RUNNER_KEYS = {"work_dir", "load_from", "resume", "optim_wrapper", "param_scheduler", "train_cfg"}
RUNNER_KEYS |= {"val_cfg", "test_cfg", "default_hooks", "custom_hooks", "log_processor", "env_cfg"}
RUNNER_KEYS |= {"log_level", "visualizer", "randomness", "launcher", "auto_scale_lr", "tta_model"}
HEAD_KEYS = ("num_classes", "ignore_index")
RUNNER_KEYS |= {"max_iters", "val_interval", "checkpoint_interval", "compile", "strategy"}


class DatasetNotFoundError(FileNotFoundError):
    """A dataset folder or split file does not exist, or a split without labels needs them."""


class ClassCountError(ValueError):
    """A head's ``num_classes`` differs from the number of classes of a configured dataset."""


def prepare_commands(devkit: str = DEVKIT, shapes: str = SHAPES) -> dict[str, str]:
    """The commands that prepare VOC (into ``devkit``) and Context Shapes (into ``shapes``)."""
    tool = "python tools/dataset_converters/"
    context_json = osp.join(devkit, "VOC2010", "trainval_merged.json")
    out = "" if osp.normpath(shapes) == SHAPES else " " + shlex.join(["--out-dir", shapes])
    return {
        "voc_aug": tool + shlex.join(["voc_aug.py", devkit, osp.join(devkit, "VOCaug")]),
        "pascal_context": tool + shlex.join(["pascal_context.py", devkit, context_json]),
        "context_shapes": f"{tool}generate_context_shapes.py{out}",
    }


def prepare_hint(dataset_cfg: dict) -> str:
    """What prepares the dataset of ``dataset_cfg`` where it is read (a moved data_root too)."""
    kind = str(dataset_cfg.get("type", ""))
    text = f"{kind} {dataset_cfg.get('data_root')} {dataset_cfg.get('ann_file')}".lower()
    root = osp.normpath(str(dataset_cfg.get("data_root") or SHAPES))
    devkit = osp.dirname(root) if osp.basename(root) in ("VOC2012", "VOC2010") else DEVKIT
    commands = prepare_commands(devkit, root)
    after = " (after the downloads data/README.md lists)"
    if "context_shapes" in text or kind == "ContextShapesDataset":
        return f"Generate it with: {commands['context_shapes']}"
    if "voc2010" in text or "pascalcontext" in text:
        return f"Prepare it with: {commands['pascal_context']}{after}"
    if "voc" in text and is_label_free(dataset_cfg):
        return "Extract VOC2012test.tar (PASCAL VOC evaluation server) into data/ (data/README.md)"
    if "voc" in text:
        return f"Prepare it with: {commands['voc_aug']}{after}"
    if "ade" in text:
        return "Unzip ADEChallengeData2016.zip into data/ade/ (data/README.md, ADE20K)"
    if kind in ("BaseSegDataset", ""):  # the custom templates: the user's own data
        return (
            "Put your images and label maps there in the config's layout, or point data_root at "
            "them (--cfg-options data_root=PATH); docs/custom_dataset.md"
        )
    return "See data/README.md for how to download and prepare the datasets"


def is_label_free(dataset_cfg: dict) -> bool:
    """A split without labels (VOC 2012 test): a ``data_prefix`` given without seg_map_path."""
    prefix = dataset_cfg.get("data_prefix")
    return isinstance(prefix, dict) and "seg_map_path" not in prefix


def data_path(dataset_cfg: dict, path: str) -> str:
    """``path`` joined with the dataset's ``data_root`` unless absolute (mmengine's rule)."""
    root, path = dataset_cfg.get("data_root") or "", osp.expanduser(path)
    return osp.join(osp.expanduser(root), path) if root and not osp.isabs(path) else path


def _path_problem(dataset_cfg: dict) -> Optional[str]:
    """A folder or split file the dataset names that does not exist, or a split file that lists
    names with the image suffix (added again by mmseg)."""
    root = dataset_cfg.get("data_root")
    if root and not osp.isdir(osp.expanduser(root)):
        return f"not found: data_root folder {osp.expanduser(root)}"
    for key, folder in (dataset_cfg.get("data_prefix") or {}).items():
        if folder and not osp.isdir(data_path(dataset_cfg, folder)):
            return f"not found: {key} folder {data_path(dataset_cfg, folder)}"
    ann = data_path(dataset_cfg, dataset_cfg["ann_file"]) if dataset_cfg.get("ann_file") else None
    if ann and not osp.isfile(ann):
        return f"not found: split file (ann_file) {ann}"
    suffix = dataset_cfg.get("img_suffix", ".jpg")
    if not (ann and suffix):
        return None
    with open(ann) as lines:
        first = next((line.strip() for line in lines if line.strip()), "")
    if first.endswith(suffix):
        return (
            f"split file {ann} lists names with the image suffix ({first}), which mmseg adds "
            f"again ({first}{suffix}): list names without it ({first[: -len(suffix)]})"
        )
    return None


def check_dataset_paths(cfg: Config, splits: Optional[Sequence[str]] = None) -> None:
    """:class:`DatasetNotFoundError` for a missing folder or split file of the splits (default:
    all), then :func:`check_num_classes` and :func:`check_label_free_splits`."""
    for split, dataset_cfg in split_datasets(cfg, splits):
        if problem := _path_problem(dataset_cfg):
            raise DatasetNotFoundError(
                f"{split}_dataloader ({dataset_cfg.get('type', 'dataset')}, data_root="
                f"{dataset_cfg.get('data_root')!r}): {problem}. {prepare_hint(dataset_cfg)}"
            )
    check_num_classes(cfg, splits)
    check_label_free_splits(cfg, splits)


def _format_only(metric: dict) -> bool:
    """The metric's ``format_only``, with the registered class's default if not set."""
    kind = metric.get("type")
    metric_cls = METRICS.get(kind.split(".")[-1]) if isinstance(kind, str) else kind
    try:
        default = inspect.signature(metric_cls).parameters["format_only"].default
    except (TypeError, ValueError, KeyError):
        default = False
    return bool(metric.get("format_only", default))


def check_label_free_splits(cfg: Config, splits: Optional[Sequence[str]] = None) -> None:
    """:class:`DatasetNotFoundError` if a split without labels (:func:`is_label_free`) loads
    labels or has a metric that is not ``format_only`` (mmseg: a KeyError at the first image)."""
    for split, dataset_cfg in split_datasets(cfg, splits):
        if not is_label_free(dataset_cfg):
            continue
        where = f"{split}_dataloader has no labels (data_prefix without seg_map_path)"
        if "LoadAnnotations" in transform_types(dataset_cfg.get("pipeline", [])):
            raise DatasetNotFoundError(
                f"{where} but its pipeline loads them (LoadAnnotations; with --tta the config's "
                "tta_pipeline): use a pipeline without it, e.g. label_free_test_pipeline of "
                "configs/_base_/datasets/voc12aug_hamnet.py"
            )
        metrics = cfg.get(f"{split}_evaluator")
        metrics = metrics.get("metrics", metrics) if isinstance(metrics, dict) else metrics
        for metric in [metrics] if isinstance(metrics, dict) else metrics or []:
            if isinstance(metric, dict) and not _format_only(metric):
                raise DatasetNotFoundError(
                    f"{where} but {split}_evaluator {metric.get('type')} compares with labels: "
                    "set format_only=True, e.g. VOCSubmissionMetric as in configs/ham_voc_test.py"
                )


def check_num_classes(cfg: Config, splits: Optional[Sequence[str]] = None) -> None:
    """:class:`ClassCountError` if a head's ``num_classes``, a top-level ``classes`` variable or
    a palette differs from a dataset's classes (a child of the custom template that sets
    ``classes`` alone changes nothing: mmengine computed the template's loaders from its own)."""
    variable = cfg.get("classes")
    for split, dataset_cfg in split_datasets(cfg, splits):
        classes = dataset_classes(dataset_cfg)
        if classes is None:
            continue
        names = f"{len(classes)} classes ({first_items(classes, 6)})"
        if isinstance(variable, (list, tuple)) and tuple(variable) != classes:
            raise ClassCountError(
                f"the config sets classes=({first_items(variable, 6)}) but the {split}_dataloader"
                f" dataset has classes=({first_items(classes, 6)}): a child config that changes "
                "the classes sets the head's num_classes and each dataset's metainfo, as "
                "configs/custom/hamhead-nmf_r18-d8_custom-classes.py does"
            )
        for name, head in heads(cfg.get("model")):
            if head["num_classes"] != len(classes):
                knob = f"Set model.{name}.num_classes={len(classes)} or change the classes"
                if isinstance(variable, (list, tuple)) and "palette" in cfg:  # the template
                    knob = "Edit the classes and palette variables (--cfg-options classes=... "
                    knob += "palette=...): they set the head and every dataloader"
                raise ClassCountError(
                    f"model.{name}.num_classes={head['num_classes']} but the {split}_dataloader "
                    f"dataset ({dataset_cfg.get('type')}) has {names}. {knob}"
                )
        palette = (dataset_cfg.get("metainfo") or {}).get("palette")
        # a subset of the dataset class's own classes takes its colours from the class
        if (
            palette
            and len(palette) != len(classes)
            and not dataset_class_metainfo(dataset_cfg).get("classes")
        ):
            raise ClassCountError(
                f"the {split}_dataloader dataset has {names} but {len(palette)} palette colours:"
                " give palette one RGB colour per class (--cfg-options palette=...)"
            )


def data_cfg_options(options: Sequence[str]) -> list[str]:
    """The ``--cfg-options`` words (``['--cfg-options', 'k=v', ...]``) that can change what
    tools/validate_dataset.py checks: not the runner's settings, of the model only the heads'
    ``num_classes`` and ``ignore_index``."""
    kept: list[str] = []
    keep = False
    for word in options[1:]:
        if "=" in word:  # a word without "=" continues the previous value
            key = word.split("=", 1)[0]
            model = key.startswith("model.") and key.rsplit(".", 1)[-1] not in HEAD_KEYS
            keep = key.split(".")[0] not in RUNNER_KEYS and not model
        kept += [word] if keep else []
    return ["--cfg-options", *kept] if kept else []


def sample_error(err: BaseException) -> Optional[str]:
    """The one line of an error that a bad file raised while loading (also from a DataLoader
    worker, whose message ends with the original one): hamseg's, or mmcv's for a missing file or
    an image it cannot decode; None for any other error."""
    line = one_line(err)  # a worker's: the original error's message
    missing = isinstance(err, FileNotFoundError) and "No such file or directory" in line
    if isinstance(err, InvalidSampleError) or missing:
        return line
    if isinstance(err, AssertionError) and line.startswith("failed to load image: "):
        return f"image file {line.split(': ', 1)[1]!r} is corrupt or not an image"
    return None


@dataclass
class DatasetReport:
    """A split's scan: one message per bad file; ``same_as``: an earlier split, same datasets."""

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


def _check_sample(item: tuple[dict, dict]) -> list[str]:
    """The problems of one sample (``item``: the reading options, mmseg's data info)."""
    opts, info = item
    try:
        img = read_image(info["img_path"], opts["color"], opts["img_backend"], opts["args"])
        if "seg_map_path" not in info:  # a split without labels
            return []
        path = info["seg_map_path"]
        raw = read_image(path, "unchanged", opts["seg_backend"], opts["args"], "label").squeeze()
    except InvalidSampleError as err:
        return [str(err)]
    reduce, label_map = info.get("reduce_zero_label", False), info.get("label_map")
    found = label_problems(raw, opts["num_classes"], opts["ignore"], reduce, label_map, img.shape)
    return (
        [f"label file {path!r}: {'; '.join(found)} (image {info['img_path']!r})"] if found else []
    )


def validate_splits(
    cfg: Config, splits: Optional[Sequence[str]] = None, workers: int = 1, progress: bool = True
) -> list[DatasetReport]:
    """:func:`check_dataset_paths`, then every sample of the splits (default: all defined), read
    with the decode backends of their pipelines, in ``workers`` processes: a report per split.
    Labels are checked against the dataset's classes and the head's ``ignore_index`` (255)."""
    defined = defined_splits(cfg)
    if not defined or any(s not in defined for s in splits or ()):
        asked = " or ".join([s for s in splits or () if s not in defined] or ["a"])
        raise DatasetNotFoundError(
            f"the config has no {asked}_dataloader with a dataset (it defines: "
            f"{', '.join(defined) or 'none'})"
        )
    splits = [s for s in defined if not splits or s in splits]
    check_dataset_paths(cfg, splits)
    init_default_scope(cfg.get("default_scope", "mmseg"))
    head = next((head for _, head in heads(cfg.get("model"))), {})
    reports: list[DatasetReport] = []
    seen: dict[str, list] = {}
    for split in splits:
        leaves = [dict(leaf) for _, leaf in split_datasets(cfg, (split,))]
        data = [{k: v for k, v in leaf.items() if k != "pipeline"} for leaf in leaves]
        same = next((s for s, other in seen.items() if other == data), None)
        seen[split] = data
        if same is not None:
            reports.append(DatasetReport(split, reports[splits.index(same)].num_samples, [], same))
            continue
        items = []
        for leaf in leaves:
            steps = {str(s.get("type")).split(".")[-1]: s for s in leaf.get("pipeline") or []}
            image, label = steps.get("LoadImageFromFile", {}), steps.get("LoadAnnotations", {})
            dataset = DATASETS.build(dict(leaf, pipeline=[], lazy_init=False))
            opts = dict(
                color=image.get("color_type", "color"),
                img_backend=image.get("imdecode_backend", "cv2"),
                seg_backend=label.get("imdecode_backend", "pillow"),
                args=leaf.get("backend_args"),
                num_classes=len(dataset.metainfo["classes"]),
                ignore=head.get("ignore_index", 255),
            )
            items += [(opts, dataset.get_data_info(i)) for i in range(len(dataset))]
        bar = sys.stderr if progress else io.StringIO()
        found = (
            track_parallel_progress(_check_sample, items, workers, chunksize=16, file=bar)
            if workers > 1
            else track_progress(_check_sample, items, file=bar)
        )
        reports.append(
            DatasetReport(split, len(items), [p for problems in found for p in problems])
        )
    return reports
