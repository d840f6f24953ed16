"""Every split a hamseg tool runs loads through the checked transforms, whatever the config says.

mmcv's ``LoadImageFromFile`` and mmseg's ``LoadAnnotations`` do not check what they load: a
corrupt image fails later with an unrelated ``AttributeError``, a label value outside the classes
crashes the loss without a file name ("Target 7 is out of bounds") or is silently evaluated. A
config that uses them (mmseg's own configs; hamseg's ``configs/segnext/*_ade20k`` leaves, which
change only the decode head over ``mmseg::segnext/...``) is therefore upgraded by the tools
(train, test, validate_dataset: :func:`~hamseg.datasets.config_checks.check_dataset_paths`) to
hamseg's drop-ins :class:`~hamseg.datasets.transforms.CheckedLoadImageFromFile` and
:class:`~hamseg.datasets.transforms.CheckedLoadAnnotations`, with the same arguments; the label
loader also gets the class count and ignore index of the decode head, and so does a
``CheckedLoadAnnotations`` written without ``num_classes`` (the custom template's: a child config
changes the class count in the head and the dataset's ``metainfo`` alone). One info line says so.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Optional

from mmengine.config import Config

from hamseg.utils.config import dataset_classes, heads, split_datasets

__all__ = ["UPGRADES", "use_checked_loaders"]

#: mmcv/mmseg loading transform -> hamseg's checked drop-in (same arguments and outputs).
UPGRADES = {
    "LoadImageFromFile": "CheckedLoadImageFromFile",
    "LoadAnnotations": "CheckedLoadAnnotations",
}


def _label_settings(cfg: Config, dataset_cfg: dict) -> tuple[Optional[int], int]:
    """(num_classes, ignore_index) for ``CheckedLoadAnnotations``: the decode head's, which the
    loss uses (else the dataset's class count and 255); num_classes None if neither is known."""
    found = list(heads(cfg.get("model")))
    if found:
        head = found[0][1]
        return int(head["num_classes"]), int(head.get("ignore_index", 255))
    classes = dataset_classes(dataset_cfg)
    return (len(classes) if classes else None), 255


def _checked_type(kind: Any) -> Any:
    """The checked drop-in's ``type`` for an unchecked loader's ``type``, else None.

    A scoped name keeps a scope ('mmcv.LoadImageFromFile' -> 'mmseg.CheckedLoadImageFromFile':
    hamseg registers into mmseg's registry); a class (pure-Python configs) becomes the class.
    """
    if isinstance(kind, str):
        scope, _, name = kind.rpartition(".")
        if name not in UPGRADES:
            return None
        return f"mmseg.{UPGRADES[name]}" if scope else UPGRADES[name]
    name = getattr(kind, "__name__", None)
    module = getattr(kind, "__module__", "")
    if name in UPGRADES and module.split(".")[0] in ("mmcv", "mmseg"):
        from . import transforms

        return getattr(transforms, UPGRADES[name])
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
    if kind in ("CheckedLoadAnnotations", "mmseg.CheckedLoadAnnotations") and (
        node.get("num_classes") is None
    ):
        if num_classes is not None:
            node["num_classes"] = num_classes
            node.setdefault("ignore_index", ignore_index)
            done.append(f"CheckedLoadAnnotations(num_classes={num_classes}, from the decode head)")
        return
    new = _checked_type(kind)
    if new is not None:
        old = node["type"] if isinstance(node["type"], str) else node["type"].__name__
        old = old.rpartition(".")[2]
        if old == "LoadAnnotations":
            if num_classes is None:
                return  # nothing to check the values against: keep mmseg's loader
            node["num_classes"] = num_classes
            node.setdefault("ignore_index", ignore_index)
            done.append(
                f"{old} -> {UPGRADES[old]}(num_classes={num_classes}, "
                f"ignore_index={node['ignore_index']})"
            )
        else:
            done.append(f"{old} -> {UPGRADES[old]}")
        node["type"] = new
        return
    for value in node.values():
        _upgrade(value, num_classes, ignore_index, done)


def use_checked_loaders(cfg: Config, splits: Optional[Sequence[str]] = None) -> list[str]:
    """Upgrade the unchecked loading transforms of the splits' dataset pipelines, in place.

    Every ``LoadImageFromFile`` becomes ``CheckedLoadImageFromFile`` and every ``LoadAnnotations``
    ``CheckedLoadAnnotations`` (nested ones, e.g. in ``TestTimeAug``, too), keeping their
    arguments; ``CheckedLoadAnnotations`` also gets ``num_classes`` and ``ignore_index`` (see
    :func:`_label_settings`). Logs one info line when anything was replaced.

    Args:
        cfg: The run's config.
        splits: Which of 'train', 'val', 'test'; default: every dataloader the config defines.

    Returns:
        One entry per replaced transform: '<split>: <old> -> <new>[(num_classes=N, ...)]'.
    """
    replaced: list[str] = []
    for split, dataset_cfg in split_datasets(cfg, splits):
        num_classes, ignore_index = _label_settings(cfg, dataset_cfg)
        done: list[str] = []
        _upgrade(dataset_cfg.get("pipeline"), num_classes, ignore_index, done)
        replaced += [f"{split}: {change}" for change in done]
    if replaced:
        from mmengine.logging import print_log

        where, changes = [], []
        for entry in replaced:
            split, change = entry.split(": ", 1)
            where += [split] if split not in where else []
            changes += [change] if change not in changes else []
        print_log(
            f"{', '.join(where)} data: loading with hamseg's checked transforms, same arguments "
            f"({'; '.join(changes)}): a missing or corrupt file or a bad label value stops with "
            "one line naming the file.",
            logger="current",
            level=logging.INFO,
        )
    return replaced
