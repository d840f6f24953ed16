"""Config-dict helpers: the parts of a config the data checks look at (datasets per split, heads,
transforms), and ``--cfg-options`` merging where a ``data_root`` override moves the datasets."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Optional

from mmengine.config import Config

from .errors import UsageError

__all__ = [
    "SPLITS",
    "dataset_classes",
    "defined_splits",
    "heads",
    "leaf_datasets",
    "merge_cfg_options",
    "split_datasets",
    "transform_types",
]

SPLITS = ("train", "val", "test")


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


def defined_splits(cfg: Config) -> list[str]:
    """The splits of :data:`SPLITS` whose ``<split>_dataloader`` has a dataset, in that order."""
    return [s for s in SPLITS if (cfg.get(f"{s}_dataloader") or {}).get("dataset")]


def split_datasets(cfg: Config, splits: Optional[Sequence[str]]) -> Iterator[tuple[str, dict]]:
    """(split, leaf dataset config) of the given splits (default: all), in split order."""
    for split in splits or SPLITS:
        loader = cfg.get(f"{split}_dataloader")
        if not loader or not loader.get("dataset"):
            continue
        for leaf in leaf_datasets(loader["dataset"]):
            yield split, leaf


def transform_types(node: Any) -> Iterator[str]:
    """Every transform ``type`` in a pipeline, nested ones (TestTimeAug, RandomChoice) too,
    without a scope prefix ('mmseg.LoadAnnotations' -> 'LoadAnnotations')."""
    if isinstance(node, dict):
        if isinstance(node.get("type"), str):
            yield node["type"].split(".")[-1]
        for value in node.values():
            yield from transform_types(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            yield from transform_types(value)


def dataset_class_metainfo(dataset_cfg: dict) -> dict:
    """The ``METAINFO`` of a dataset config's class (its registered ``type``); {} if unknown."""
    kind = dataset_cfg.get("type")
    if not isinstance(kind, str):
        return {}
    from mmseg.registry import DATASETS

    dataset_cls = DATASETS.get(kind.split(".")[-1])
    return dict(getattr(dataset_cls, "METAINFO", None) or {}) if dataset_cls else {}


def dataset_classes(dataset_cfg: dict) -> Optional[tuple]:
    """The classes of a dataset config: its ``metainfo.classes``, else its class's METAINFO."""
    metainfo = dataset_cfg.get("metainfo") or {}
    classes = metainfo.get("classes") or dataset_class_metainfo(dataset_cfg).get("classes")
    return tuple(classes) if classes else None


def heads(model_cfg: Any) -> Iterator[tuple[str, dict]]:
    """(name, head config) of every decode/auxiliary head, inside TTA wrappers too."""
    if not isinstance(model_cfg, dict):
        return
    if isinstance(model_cfg.get("module"), dict):  # SegTTAModel(module=...)
        yield from heads(model_cfg["module"])
    for key in ("decode_head", "auxiliary_head"):
        found = model_cfg.get(key)
        if isinstance(found, dict):
            found = [found]
        for i, head in enumerate(found or []):
            if isinstance(head, dict) and "num_classes" in head:
                name = key if len(found) == 1 else f"{key}[{i}]"
                yield name, head


def merge_cfg_options(
    cfg: Config,
    options: dict,
    merge: Callable[..., None] = Config.merge_from_dict,
    *merge_args: object,
) -> None:
    """``--cfg-options``: ``merge(cfg, options, *merge_args)``, where a ``data_root`` option
    moves every dataset that used the config's ``data_root`` variable (:func:`_apply_data_root`).

    Args:
        cfg: The config, changed in place.
        options: The parsed ``--cfg-options``.
        merge: mmengine's ``Config.merge_from_dict`` (the original, when it is patched to call
            this: :mod:`hamseg.compat.mmseg_tool_fixes`).
        *merge_args: Further arguments of ``merge`` (``allow_list_keys``).

    Raises:
        UsageError: ``data_root`` given, but no dataset used the old value.
    """
    old_root = cfg.get("data_root")
    merge(cfg, options, *merge_args)
    if "data_root" in options:
        _apply_data_root(cfg, old_root, options["data_root"])


def _apply_data_root(cfg: Config, old: object, new: str) -> None:
    """``--cfg-options data_root=PATH``: move every dataset that used the config's ``data_root``.

    A config's top-level ``data_root`` is a variable: its value is copied into each dataset
    when the file is read, so overriding the variable alone changes nothing. Here each dataset
    whose ``data_root`` equals the variable's old value gets the new one, as the user meant.

    Raises:
        UsageError: No dataset used the old value (then the override could not mean anything).
    """
    moved = []
    for split in SPLITS:
        loader = cfg.get(f"{split}_dataloader")
        for dataset in leaf_datasets(loader.get("dataset") if loader else None):
            root = dataset.get("data_root")
            if old is not None and root == old:
                dataset["data_root"] = new
                moved.append(split)
            elif root == new:  # also set by a <split>_dataloader.dataset.data_root option
                moved.append(split)
    if not moved:
        raise UsageError(
            f"--cfg-options data_root={new}: no dataset of this config uses its data_root "
            f"variable ({old!r}); set <split>_dataloader.dataset.data_root=PATH instead"
        )
