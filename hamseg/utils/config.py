"""Config-dict walking for the data checks (datasets per split, heads, transforms) and
``--cfg-options`` merging where ``data_root=PATH`` moves the datasets that used the variable."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from mmengine.config import Config
from mmseg.registry import DATASETS

from .errors import UsageError

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
    """The splits of :data:`SPLITS` whose ``<split>_dataloader`` has a dataset, in that order."""
    return [s for s in SPLITS if (cfg.get(f"{s}_dataloader") or {}).get("dataset")]


def split_datasets(cfg: Config, splits: Sequence[str] | None) -> Iterator[tuple[str, dict]]:
    """(split, leaf dataset config) of the given splits (default: all), in split order."""
    for split in splits or SPLITS:
        for leaf in leaf_datasets((cfg.get(f"{split}_dataloader") or {}).get("dataset")):
            yield split, leaf


def transform_types(node: Any) -> Iterator[str]:
    """Every transform ``type`` in a pipeline, nested ones (TestTimeAug, RandomChoice) too,
    without a scope prefix ('mmseg.LoadAnnotations' -> 'LoadAnnotations')."""
    if isinstance(node, dict):
        if isinstance(node.get("type"), str):
            yield node["type"].split(".")[-1]
        node = list(node.values())
    for value in node if isinstance(node, (list, tuple)) else ():
        yield from transform_types(value)


def dataset_class_metainfo(dataset_cfg: dict) -> dict:
    """The ``METAINFO`` of a dataset config's registered class; {} if unknown."""
    kind = dataset_cfg.get("type")
    dataset_cls = DATASETS.get(kind.split(".")[-1]) if isinstance(kind, str) else None
    return dict(getattr(dataset_cls, "METAINFO", None) or {})


def dataset_classes(dataset_cfg: dict) -> tuple | None:
    """The classes of a dataset config: its ``metainfo.classes``, else its class's METAINFO."""
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


def merge_cfg_options(cfg: Config, options: dict, merge: Callable = Config.merge_from_dict, *args):
    """``--cfg-options``: ``merge(cfg, options, *args)``; ``data_root=PATH`` also moves every
    dataset that had the variable's old value (copied into each when the file was read);
    ``max_iters=N`` also sets ``train_cfg.max_iters`` and moves the ``by_epoch=False`` scheduler
    ends, ``val_interval`` and checkpoint interval that had the old value (a warm-up that no
    longer fits becomes a tenth of the run): one schedule knob.
    ``merge``: mmengine's, or the original when it is patched to call this."""
    old = cfg.get("data_root")
    train = cfg.get("train_cfg") or {}
    old_iters = cfg.get("max_iters", train.get("max_iters"))
    merge(cfg, options, *args)
    if "max_iters" in options:
        train = cfg.get("train_cfg") or {}
        hooks = cfg.get("default_hooks") or {}
        schedulers = cfg.get("param_scheduler") or []
        schedulers = [schedulers] if isinstance(schedulers, dict) else schedulers
        places = [(train, "val_interval"), (hooks.get("checkpoint") or {}, "interval")]
        places += [(s, "end") for s in schedulers if s.get("by_epoch") is False]
        for node, key in [(train, "max_iters"), *places]:
            if node.get(key) == old_iters:
                node[key] = options["max_iters"]
        n = options["max_iters"]
        warm = max(1, options["max_iters"] // 10)
        for sched in (s for s in schedulers if s.get("by_epoch") is False):
            # a warm-up as long as the new run: a tenth of it (mmengine needs begin < end)
            if sched.get("end", 0) > n:
                sched["end"] = warm
            if sched.get("begin", 0) >= n:
                sched["begin"] = warm
    new = options.get("data_root")
    moved = "data_root" not in options
    for _, dataset in split_datasets(cfg, SPLITS) if not moved else ():
        if old is not None and dataset.get("data_root") == old:
            dataset["data_root"] = new
        moved = moved or dataset.get("data_root") == new  # or a <split> option set it
    if not moved:
        raise UsageError(
            f"--cfg-options data_root={new}: no dataset of this config uses its data_root "
            f"variable ({old!r}); set <split>_dataloader.dataset.data_root=PATH instead"
        )
