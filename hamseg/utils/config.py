"""Walking a config's datasets and heads."""

from collections.abc import Iterator, Sequence
from typing import Any

from mmengine.config import Config
from mmseg.registry import DATASETS

SPLITS = ("train", "val", "test")


def leaf_datasets(node: Any) -> Iterator[dict]:
    """The dataset configs inside wrappers (RepeatDataset, ConcatDataset, lists)."""
    if isinstance(node, dict):
        inner = node.get("dataset", node.get("datasets"))
        yield from [node] if inner is None else leaf_datasets(inner)
    elif isinstance(node, (list, tuple)):
        for inner in node:
            yield from leaf_datasets(inner)


def defined_splits(cfg: Config) -> list[str]:
    """The splits whose ``<split>_dataloader`` has a dataset, in :data:`SPLITS` order."""
    return [s for s in SPLITS if (cfg.get(f"{s}_dataloader") or {}).get("dataset")]


def split_datasets(cfg: Config, splits: Sequence[str] | None) -> Iterator[tuple[str, dict]]:
    """(split, leaf dataset config) of the given splits (default: all)."""
    for split in splits or SPLITS:
        for leaf in leaf_datasets((cfg.get(f"{split}_dataloader") or {}).get("dataset")):
            yield split, leaf


def dataset_class_metainfo(dataset_cfg: dict) -> dict:
    """The ``METAINFO`` of a dataset config's registered class; {} if unknown."""
    kind = dataset_cfg.get("type")
    dataset_cls = DATASETS.get(kind.split(".")[-1]) if isinstance(kind, str) else None
    return dict(getattr(dataset_cls, "METAINFO", None) or {})


def dataset_classes(dataset_cfg: dict) -> tuple | None:
    """The classes of a dataset config: its ``metainfo.classes``, else its class's."""
    metainfo = dataset_cfg.get("metainfo") or {}
    classes = metainfo.get("classes") or dataset_class_metainfo(dataset_cfg).get("classes")
    return tuple(classes) if classes else None


def heads(model_cfg: Any) -> Iterator[tuple[str, dict]]:
    """(name, head config) of every decode/auxiliary head, inside TTA wrappers too."""
    if not isinstance(model_cfg, dict):
        return
    yield from heads(model_cfg.get("module"))  # SegTTAModel(module=...)
    for key in ("decode_head", "auxiliary_head"):
        found = model_cfg.get(key)
        found = [found] if isinstance(found, dict) else found or []
        for i, head in enumerate(found):
            if isinstance(head, dict) and "num_classes" in head:
                yield (key if len(found) == 1 else f"{key}[{i}]"), head
