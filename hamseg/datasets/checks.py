"""Data checks of a config before anything heavy runs (:func:`check_dataset_paths`), and of every
sample of its splits (:func:`validate_splits`). docs/robustness.md.
"""

from __future__ import annotations

import copy
import inspect
import os.path as osp
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import mmengine.logging
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmseg.registry import DATASETS, METRICS

from hamseg.utils.config import (
    dataset_class_metainfo,
    dataset_classes,
    defined_splits,
    heads,
    split_datasets,
    transform_types,
)
from hamseg.utils.messages import first_items
from hamseg.utils.progress_map import map_with_progress

from .loading import CheckedLoadAnnotations, CheckedLoadImageFromFile, InvalidSampleError

#: Where the converters and the configs put each known dataset by default.
DEVKIT = "data/VOCdevkit"
SHAPES = "data/context_shapes"


def prepare_commands(devkit: str = DEVKIT, shapes: str = SHAPES) -> dict[str, str]:
    """Exact commands (run from the repository root) that prepare each known dataset, VOC's into
    ``devkit`` and Context Shapes into ``shapes``: 'voc_aug', 'pascal_context', 'context_shapes'."""

    def command(script: str, *args: str) -> str:
        return "python " + shlex.join([f"tools/dataset_converters/{script}", *args])

    context_json = osp.join(devkit, "VOC2010", "trainval_merged.json")
    out = () if osp.normpath(shapes) == SHAPES else ("--out-dir", shapes)
    return {
        "voc_aug": command("voc_aug.py", devkit, osp.join(devkit, "VOCaug")),
        "pascal_context": command("pascal_context.py", devkit, context_json),
        "context_shapes": command("generate_context_shapes.py", *out),
    }


#: mmcv/mmseg loader -> hamseg's checked drop-in (same arguments), and what the scan reads of it.
UPGRADES = {
    "LoadImageFromFile": (CheckedLoadImageFromFile, ("imdecode_backend",)),
    "LoadAnnotations": (CheckedLoadAnnotations, ("imdecode_backend", "ignore_index")),
}


class DatasetNotFoundError(FileNotFoundError):
    """A dataset folder or split file does not exist, or a split without labels needs them."""


class ClassCountError(ValueError):
    """A head's ``num_classes`` differs from the number of classes of a configured dataset."""


def _upgrade(node: Any, num_classes: Optional[int], ignore_index: int, done: list[str]) -> None:
    """Replace the unchecked loaders in a pipeline (nested lists/dicts too), in place."""
    if isinstance(node, (list, tuple)):
        for value in node:
            _upgrade(value, num_classes, ignore_index, done)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if isinstance(kind, str):
        scope, _, name = kind.rpartition(".")
        new = f"{'mmseg.' if scope else ''}Checked{name}"  # hamseg registers into mmseg
    else:  # a class (pure-Python configs) of mmcv or mmseg
        name = getattr(kind, "__name__", "")
        name = name if getattr(kind, "__module__", "").split(".")[0] in ("mmcv", "mmseg") else ""
        new = UPGRADES.get(name, (None,))[0]
    if name == "CheckedLoadAnnotations" and node.get("num_classes") is None and num_classes:
        node.update(num_classes=num_classes, ignore_index=node.get("ignore_index", ignore_index))
        done.append(f"CheckedLoadAnnotations(num_classes={num_classes}, from the decode head)")
    elif name == "LoadAnnotations" and num_classes is not None:  # else nothing to check against
        node.update(type=new, num_classes=num_classes)
        node.setdefault("ignore_index", ignore_index)
        done.append(
            f"{name} -> Checked{name}(num_classes={num_classes}, "
            f"ignore_index={node['ignore_index']})"
        )
    elif name == "LoadImageFromFile":
        node["type"] = new
        done.append(f"{name} -> Checked{name}")
    elif name != "CheckedLoadAnnotations":
        for value in node.values():
            _upgrade(value, num_classes, ignore_index, done)


def use_checked_loaders(cfg: Config, splits: Optional[Sequence[str]] = None) -> list[str]:
    """Make the splits' pipelines (default: all) load with the checked drop-ins (same arguments;
    the label loader gets the decode head's ``num_classes`` / ``ignore_index``, else the dataset's
    class count and 255, else stays mmseg's), in place; one info line; '<split>: <change>'s."""
    head = next((head for _, head in heads(cfg.get("model"))), None)
    replaced: list[str] = []
    for split, dataset_cfg in split_datasets(cfg, splits):
        classes = dataset_classes(dataset_cfg)
        num_classes = int(head["num_classes"]) if head else len(classes) if classes else None
        ignore_index = int(head.get("ignore_index", 255)) if head else 255
        done: list[str] = []
        _upgrade(dataset_cfg.get("pipeline"), num_classes, ignore_index, done)
        replaced += [f"{split}: {change}" for change in done]
    if replaced:
        where = dict.fromkeys(entry.split(": ", 1)[0] for entry in replaced)
        changes = dict.fromkeys(entry.split(": ", 1)[1] for entry in replaced)
        mmengine.logging.print_log(
            f"{', '.join(where)} data: loading with hamseg's checked transforms, same arguments "
            f"({'; '.join(changes)}): a missing or corrupt file or a bad label value stops with "
            "one line naming the file.",
            logger="current",
        )
    return replaced


def prepare_hint(dataset_cfg: dict, path: str) -> str:
    """The command (or document) that prepares the dataset a missing ``path`` belongs to, into
    the dataset's data_root (a data_root moved by ``--cfg-options`` included)."""
    kind = str(dataset_cfg.get("type", ""))
    text = " ".join(str(dataset_cfg.get(k, "")) for k in ("type", "data_root", "ann_file"))
    text = f"{text} {path}".lower().replace("\\", "/")
    voc = "voc" in text or kind == "PascalVOCDataset"
    root = osp.normpath(str(dataset_cfg.get("data_root") or SHAPES))
    devkit = osp.dirname(root) if osp.basename(root) in ("VOC2012", "VOC2010") else DEVKIT
    commands = prepare_commands(devkit, root)
    if "context_shapes" in text or kind == "ContextShapesDataset":
        return f"Generate it with: {commands['context_shapes']}"
    if "voc2010" in text or "pascalcontext" in kind.lower():
        return (
            f"Prepare it with: {commands['pascal_context']} (after downloading VOC2010 and the "
            "Context annotations as described in data/README.md)"
        )
    if voc and is_label_free(dataset_cfg):  # the VOC 2012 test images: no converter
        return (
            "Download VOC2012test.tar from the PASCAL VOC evaluation server (after registering) "
            "and extract it with `tar -xf VOC2012test.tar -C data/` (it adds "
            "VOCdevkit/VOC2012/JPEGImages and ImageSets/Segmentation/test.txt; data/README.md)."
        )
    if voc:
        return (
            f"Prepare it with: {commands['voc_aug']} (after downloading VOC2012 and SBD as "
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
    """A split without labels (VOC 2012 test): a ``data_prefix`` given without seg_map_path."""
    prefix = dataset_cfg.get("data_prefix")
    return isinstance(prefix, dict) and "seg_map_path" not in prefix


def _missing_paths(dataset_cfg: dict) -> list[str]:
    """'<what> <path>' of each folder / split file the dataset names that does not exist;
    relative paths are joined with ``data_root`` (mmengine's rule)."""
    root = dataset_cfg.get("data_root") or None
    if root and not osp.isdir(osp.expanduser(root)):
        return [f"data_root folder {osp.expanduser(root)}"]  # everything below is missing too
    named = [(f"{k} folder", v) for k, v in (dataset_cfg.get("data_prefix") or {}).items()]
    named.append(("split file (ann_file)", dataset_cfg.get("ann_file")))
    missing = []
    for what, path in named:
        if isinstance(path, str) and path:
            path = osp.expanduser(path)
            path = osp.join(root, path) if root and not osp.isabs(path) else path
            if not (osp.isfile(path) if what.startswith("split") else osp.isdir(path)):
                missing.append(f"{what} {path}")
    return missing


def _suffixed_names(dataset_cfg: dict) -> Optional[str]:
    """What is wrong with a split file whose names carry the image suffix (added again)."""
    ann = dataset_cfg.get("ann_file")
    suffix = dataset_cfg.get("img_suffix", ".jpg")
    root = dataset_cfg.get("data_root") or ""
    path = osp.join(root, ann) if isinstance(ann, str) and ann and not osp.isabs(ann) else ann
    if not (suffix and isinstance(path, str) and path and osp.isfile(path)):
        return None
    with open(path) as lines:
        first = next((line.strip() for line in lines if line.strip()), "")
    if not first.endswith(suffix):
        return None
    return (
        f"split file {path} lists names with the image suffix ({first}), and img_suffix "
        f"{suffix!r} is added to each ({first}{suffix}): list names without it "
        f"({first[: -len(suffix)]})"
    )


def check_dataset_paths(cfg: Config, splits: Optional[Sequence[str]] = None) -> None:
    """:func:`use_checked_loaders`, then :class:`DatasetNotFoundError` for a missing folder or
    split file of the splits (default: all), then :func:`check_num_classes` and
    :func:`check_label_free_splits`."""
    use_checked_loaders(cfg, splits)
    for split, dataset_cfg in split_datasets(cfg, splits):
        missing = _missing_paths(dataset_cfg)
        if missing:
            raise DatasetNotFoundError(
                f"{split}_dataloader ({dataset_cfg.get('type', 'dataset')}, "
                f"data_root={dataset_cfg.get('data_root')!r}): not found: "
                f"{'; '.join(missing)}. {prepare_hint(dataset_cfg, missing[0])}"
            )
        if problem := _suffixed_names(dataset_cfg):
            raise DatasetNotFoundError(f"{split}_dataloader: {problem}")
    check_num_classes(cfg, splits)
    check_label_free_splits(cfg, splits)


def _format_only(metric: dict) -> bool:
    """The metric's ``format_only``, with the registered class's default if not set."""
    if "format_only" in metric:
        return bool(metric["format_only"])
    kind = metric.get("type")
    metric_cls = METRICS.get(kind.split(".")[-1]) if isinstance(kind, str) else kind
    try:
        return inspect.signature(metric_cls).parameters["format_only"].default is True
    except (TypeError, ValueError, KeyError):
        return False


def check_label_free_splits(cfg: Config, splits: Optional[Sequence[str]] = None) -> None:
    """:class:`DatasetNotFoundError` if a split without labels (:func:`is_label_free`) loads
    labels or has a metric that is not ``format_only`` (mmseg: a KeyError at the first image)."""
    for split, dataset_cfg in split_datasets(cfg, splits):
        if not is_label_free(dataset_cfg):
            continue
        where = f"{split}_dataloader ({dataset_cfg.get('type', 'dataset')}) has no labels"
        where += " (data_prefix without seg_map_path)"
        loads = set(transform_types(dataset_cfg.get("pipeline", [])))
        loads = sorted(loads & {"LoadAnnotations", "CheckedLoadAnnotations"})
        if loads:
            raise DatasetNotFoundError(
                f"{where} but its pipeline loads them ({', '.join(loads)}; with --tta the "
                "config's tta_pipeline). Use a pipeline without annotations, e.g. "
                "label_free_test_pipeline / label_free_tta_pipeline of "
                "configs/_base_/datasets/voc12aug_hamnet.py."
            )
        metrics = cfg.get(f"{split}_evaluator")
        if isinstance(metrics, dict):  # Evaluator(metrics=...) or one metric
            metrics = metrics.get("metrics", metrics)
        metrics = [metrics] if isinstance(metrics, dict) else metrics
        for metric in [m for m in metrics or [] if isinstance(m, dict)]:
            if not _format_only(metric):
                raise DatasetNotFoundError(
                    f"{where} but {split}_evaluator {metric.get('type')} compares with labels. "
                    "Set format_only=True (only write the predictions), e.g. "
                    "VOCSubmissionMetric as in configs/ham_voc_test.py."
                )


def check_num_classes(cfg: Config, splits: Optional[Sequence[str]] = None) -> None:
    """:class:`ClassCountError` if a head's ``num_classes`` or a top-level ``classes`` variable
    differs from a dataset's classes (a child of the custom template that sets ``classes`` alone
    changes nothing: mmengine evaluated the template's loaders and head from its own)."""
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
                knob = (  # the custom template sets the head from its classes variable
                    "In the custom template the classes and palette variables set the head and "
                    "every dataloader: edit them in your copy (one palette colour per class), or "
                    "pass --cfg-options classes=... palette=... (docs/custom_dataset.md)"
                    if isinstance(variable, (list, tuple)) and "palette" in cfg
                    else f"Set model.{name}.num_classes={len(classes)} or change the dataset's "
                    "metainfo classes."
                )
                raise ClassCountError(
                    f"model.{name}.num_classes={head['num_classes']} but the "
                    f"{split}_dataloader dataset ({dataset_cfg.get('type')}) has "
                    f"{len(classes)} classes ({first_items(classes, 6)}). {knob}"
                )
        palette = (dataset_cfg.get("metainfo") or {}).get("palette")
        # classes that mmseg maps to a subset of the dataset class's own take their colours
        # from that class's longer palette
        if (
            palette
            and len(palette) != len(classes)
            and not dataset_class_metainfo(dataset_cfg).get("classes")
        ):
            raise ClassCountError(
                f"the {split}_dataloader dataset has {len(classes)} classes "
                f"({first_items(classes, 6)}) but {len(palette)} palette colours: give palette "
                "one RGB colour per class (the palette line next to classes in your config, or "
                "--cfg-options palette=...)"
            )


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


def validate_splits(
    cfg: Config, splits: Optional[Sequence[str]] = None, workers: int = 1, progress: bool = True
) -> list[DatasetReport]:
    """:func:`check_dataset_paths`, then every sample of the splits (default: all defined)
    through the checked loaders in ``workers`` processes: one report per split."""
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
    seen: list[list[dict]] = []
    for split in splits:
        data = [
            {k: v for k, v in leaf.items() if k != "pipeline"}
            for _, leaf in split_datasets(cfg, (split,))
        ]
        same = next((report for report, other in zip(reports, seen) if other == data), None)
        seen.append(data)
        if same is not None:
            reports.append(DatasetReport(split, same.num_samples, [], same_as=same.split))
        else:
            reports.append(_check_samples(cfg, split, workers, progress))
    return reports


def _check_sample(item: tuple[CheckedLoadImageFromFile, CheckedLoadAnnotations, dict]) -> list:
    """The messages of one sample's image and label loaders."""
    problems = []
    results = dict(item[2])
    for load in item[:2]:
        try:
            results = load(results)
        except InvalidSampleError as err:
            problems.append(str(err))
    return problems


def _check_samples(cfg: Config, split: str, workers: int, progress: bool) -> DatasetReport:
    """Every sample of one split through checked loaders with its pipeline's decode backends
    and ignore index (else the head's, else 255) and its dataset's classes and label mapping."""
    init_default_scope(cfg.get("default_scope", "mmseg"))
    head = next((head for _, head in heads(cfg.get("model"))), {})
    items = []
    for _, dataset_cfg in split_datasets(cfg, (split,)):
        dataset_cfg = copy.deepcopy(dict(dataset_cfg))
        found = {"LoadImageFromFile": {}, "LoadAnnotations": {}}
        found["LoadAnnotations"]["ignore_index"] = head.get("ignore_index", 255)
        for step in dataset_cfg.get("pipeline") or []:
            name = str(step.get("type", "")).split(".")[-1].removeprefix("Checked")
            if name in UPGRADES:
                found[name].update({k: v for k, v in step.items() if k in UPGRADES[name][1]})
        dataset = DATASETS.build(dict(dataset_cfg, pipeline=[], lazy_init=False))
        args = {"backend_args": dataset_cfg.get("backend_args")}
        load_image = CheckedLoadImageFromFile(**args, **found["LoadImageFromFile"])
        num_classes = len(dataset.metainfo["classes"])
        load_label = CheckedLoadAnnotations(num_classes, **args, **found["LoadAnnotations"])
        items += [(load_image, load_label, dataset.get_data_info(i)) for i in range(len(dataset))]
    found = map_with_progress(
        _check_sample, items, workers, f"checking {split} samples", "sample", progress
    )
    return DatasetReport(split, len(items), [problem for item in found for problem in item])
