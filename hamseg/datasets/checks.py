"""The data checks: a config's folders, split files and class counts, then every sample (every bad
file is one line naming it)."""

import io
import os.path as osp
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import cv2
import mmcv
import numpy as np
from mmengine import fileio
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.utils import track_parallel_progress, track_progress
from mmseg.registry import DATASETS

from hamseg.utils import config as walk
from hamseg.utils.errors import first_items, one_line

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


class InvalidSampleError(ValueError):
    """An image or label file is missing, unreadable, corrupt or inconsistent."""


def read_image(path: str, step: Optional[dict] = None, what: str = "image") -> np.ndarray:
    """Decode ``path`` as the pipeline's ``LoadImageFromFile`` (``what="label"``:
    ``LoadAnnotations``) step does; :class:`InvalidSampleError` if it cannot."""
    step = step or {}
    flag = "unchanged" if what == "label" else step.get("color_type", "color")
    backend = step.get("imdecode_backend", "pillow" if what == "label" else "cv2")
    try:
        data = fileio.get(path, backend_args=step.get("backend_args"))
    except OSError as err:  # missing, a folder, no permission
        raise InvalidSampleError(f"{what} file {path!r}: {err.strerror}") from None
    # a cut JPEG decodes with grey rows on some OpenCV builds: no end marker after its last scan
    scan = data.rfind(b"\xff\xda")
    if data[:2] == b"\xff\xd8" and (scan < 0 or data.rfind(b"\xff\xd9") < scan):
        raise InvalidSampleError(f"{what} file {path!r} is corrupt: truncated (no JPEG end marker)")
    level = cv2.utils.logging.getLogLevel()
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)
    try:
        array = mmcv.imfrombytes(data, flag=flag, backend=backend)
    except Exception:  # decoders raise anything from OSError to SyntaxError
        array = None
    finally:
        cv2.utils.logging.setLogLevel(level)
    if array is None or array.size == 0:
        raise InvalidSampleError(f"{what} file {path!r} is corrupt or not an image ({backend})")
    return array


def sample_problems(sample: tuple[dict, dict, int, int, dict]) -> list[str]:
    """The problems of (image and label load steps, class count, ignore index, mmseg's data info):
    valid labels map into ``[0, num_classes)`` or to the ignore index as mmseg maps them."""
    image_step, label_step, num_classes, ignore, info = sample
    try:
        img = read_image(info["img_path"], image_step)
        if "seg_map_path" not in info:  # a split without labels
            return []
        raw = read_image(path := info["seg_map_path"], label_step, "label").squeeze()
    except InvalidSampleError as err:
        return [str(err)]
    problems = []
    if raw.shape != img.shape[:2]:
        problems.append(f"label shape {raw.shape} differs from the image's {img.shape[:2]}")
    lut = np.arange(256)  # raw value -> label, as mmseg's LoadAnnotations maps it
    if reduce := info.get("reduce_zero_label", False):
        lut = np.where((lut == 0) | (lut == 255), 255, lut - 1)
    label_map = info.get("label_map") or {}
    lut = np.array([label_map.get(int(value), value) for value in lut])
    values = np.unique(raw).astype(np.int64)
    mapped = lut[np.clip(values, 0, 255)]
    bad = (values > 255) | ((mapped < 0) | (mapped >= num_classes)) & (mapped != ignore)
    if bad.any():
        how = " after reduce_zero_label" * reduce + " and label_map" * bool(label_map)
        problems.append(
            f"label values [{first_items(values[bad].tolist(), 20)}] are outside "
            f"[0, {num_classes}){how} and are not the ignore index {ignore}"
        )
    line = f"label file {path!r}: {'; '.join(problems)} (image {info['img_path']!r})"
    return [line] if problems else []


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
