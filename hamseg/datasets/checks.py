"""The data checks: a config's folders, split files and class counts, then every sample."""

from __future__ import annotations

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
from mmseg.registry import DATASETS

from hamseg.utils import config as walk
from hamseg.utils.errors import first_items, one_line

from .loading import InvalidSampleError, sample_problems

TOOL, AFTER = "python tools/dataset_converters/", " (after the downloads data/README.md lists)"
#: Words of a dataset's type, data_root or ann_file -> what prepares the dataset where it is read.
HINTS = (
    (("contextshapes",), f"Generate it with: {TOOL}generate_context_shapes.py --out-dir {{root}}"),
    (
        ("voc2010", "pascalcontext"),
        f"Prepare it with: {TOOL}pascal_context.py {{devkit}} {{root}}/trainval_merged.json{AFTER}",
    ),
    (("segmentation/test.txt",), "Extract VOC2012test.tar (evaluation server) into data/"),
    (("voc",), f"Prepare it with: {TOOL}voc_aug.py {{devkit}} {{devkit}}/VOCaug{AFTER}"),
    (("ade",), "Unzip ADEChallengeData2016.zip into data/ade/ (data/README.md, ADE20K)"),
    (
        ("basesegdataset",),
        "Put your images and label maps there, or point data_root at them (--cfg-options "
        "data_root=PATH); docs/custom_dataset.md",
    ),
    (("",), "See data/README.md for how to download and prepare the datasets"),
)


class ClassCountError(ValueError):
    """A head's ``num_classes`` or a palette differs from a dataset's classes."""


def prepare_hint(dataset_cfg: dict) -> str:
    """What prepares the dataset of ``dataset_cfg`` where it is read (a moved data_root too)."""
    text = " ".join(str(dataset_cfg.get(k)) for k in ("type", "data_root", "ann_file"))
    root = osp.normpath(str(dataset_cfg.get("data_root") or "data/context_shapes"))
    words = text.lower().replace("_", "")
    hint = next(h for keys, h in HINTS if any(k in words for k in keys))
    return hint.format(root=shlex.quote(root), devkit=shlex.quote(osp.dirname(root)))


def data_path(dataset_cfg: dict, path: str) -> str:
    """``path`` joined with the dataset's ``data_root`` unless absolute (mmengine's rule)."""
    root, path = dataset_cfg.get("data_root") or "", osp.expanduser(path)
    return osp.join(osp.expanduser(root), path) if root and not osp.isabs(path) else path


def check_dataset_paths(cfg: Config, splits: Optional[Sequence[str]] = None) -> None:
    """:class:`FileNotFoundError` for a missing folder or split file, then the class counts."""
    for split, dataset_cfg in walk.split_datasets(cfg, splits):
        root = osp.expanduser(dataset_cfg.get("data_root") or ".")
        prefix = (dataset_cfg.get("data_prefix") or {}).items()
        folders = [("data_root", root)] + [(k, data_path(dataset_cfg, f)) for k, f in prefix if f]
        missing = [f"{key} folder {path}" for key, path in folders if not osp.isdir(path)]
        ann_file = dataset_cfg.get("ann_file")
        if ann_file and not osp.isfile(ann_file := data_path(dataset_cfg, ann_file)):
            missing.append(f"split file (ann_file) {ann_file}")
        if missing:
            where = f"{split}_dataloader ({dataset_cfg.get('type')}): not found: {missing[0]}"
            raise FileNotFoundError(f"{where}. {prepare_hint(dataset_cfg)}")
    check_num_classes(cfg, splits)


def check_num_classes(cfg: Config, splits: Optional[Sequence[str]] = None) -> None:
    """:class:`ClassCountError` if a head's ``num_classes`` differs from a dataset's classes."""
    for split, dataset_cfg in walk.split_datasets(cfg, splits):
        classes = walk.dataset_classes(dataset_cfg) or ()
        for name, head in walk.heads(cfg.get("model")):
            if classes and head["num_classes"] != len(classes):
                raise ClassCountError(
                    f"model.{name}.num_classes={head['num_classes']} but the {split}_dataloader "
                    f"dataset ({dataset_cfg.get('type')}) has {len(classes)} classes "
                    f"({first_items(classes, 6)}): set num_classes={len(classes)} or the classes"
                )


def sample_error(err: BaseException) -> Optional[str]:
    """The one line of a bad file's error while loading (in a DataLoader worker too), or None."""
    line = one_line(err)
    missing = isinstance(err, FileNotFoundError) and "No such file or directory" in line
    corrupt = isinstance(err, AssertionError) and line.startswith("failed to load image: ")
    return line if isinstance(err, InvalidSampleError) or missing or corrupt else None


@dataclass
class DatasetReport:
    """A split's scan: one message per bad file; ``same_as``: an earlier split, same datasets."""

    split: str
    num_samples: int
    problems: list[str]
    same_as: Optional[str] = None

    def summary(self) -> str:
        if self.same_as:
            return f"{self.split}: the {self.same_as} samples (checked above)"
        count = f"{n} problem{'s' * (n != 1)}" if (n := len(self.problems)) else "no problems"
        return f"{count} in {self.num_samples} {self.split} samples"


def validate_splits(
    cfg: Config, splits: Optional[Sequence[str]] = None, workers: int = 1, progress: bool = True
) -> list[DatasetReport]:
    """:func:`check_dataset_paths`, then every sample of the splits (default: all) read as their
    pipelines read them, in ``workers`` processes, labels against the head's ``ignore_index``."""
    defined = walk.defined_splits(cfg)
    if missing := [s for s in splits or defined or ["a"] if s not in defined]:
        raise FileNotFoundError(f"the config has no {missing[0]}_dataloader with a dataset")
    splits = [s for s in defined if not splits or s in splits]
    check_dataset_paths(cfg, splits)
    init_default_scope(cfg.get("default_scope", "mmseg"))
    ignore = next((head.get("ignore_index", 255) for _, head in walk.heads(cfg.get("model"))), 255)
    reports: list[DatasetReport] = []
    seen: dict[str, DatasetReport] = {}
    for split in splits:
        leaves = [dict(leaf) for _, leaf in walk.split_datasets(cfg, (split,))]
        key = repr([{k: v for k, v in leaf.items() if k != "pipeline"} for leaf in leaves])
        if key in seen:
            reports.append(DatasetReport(split, seen[key].num_samples, [], seen[key].split))
            continue
        items = []
        for leaf in leaves:
            steps = {str(s.get("type")).split(".")[-1]: s for s in leaf.get("pipeline") or []}
            try:
                dataset = DATASETS.build(dict(leaf, pipeline=[], lazy_init=False))
            except ValueError as err:  # e.g. mmseg's "palette does not match classes"
                raise ClassCountError(f"the {split}_dataloader dataset: {one_line(err)}") from None
            load = (steps.get("LoadImageFromFile"), steps.get("LoadAnnotations"))
            load += (len(dataset.metainfo["classes"]), ignore)
            items += [(*load, dataset.get_data_info(i)) for i in range(len(dataset))]
        bar = sys.stderr if progress else io.StringIO()
        if workers > 1:
            found = track_parallel_progress(sample_problems, items, workers, file=bar, chunksize=16)
        else:
            found = track_progress(sample_problems, items, file=bar)
        seen[key] = DatasetReport(split, len(items), [p for problems in found for p in problems])
        reports.append(seen[key])
    return reports
