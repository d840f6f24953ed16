"""Whether a checkpoint was trained with the decode head a config builds (tools/infer.py,
tools/deploy/export_onnx.py): the training config mmengine stores in the checkpoint and the
config, each built and recorded (:mod:`hamseg.apis.head_record`), compared in one line
(docs/deploy.md). Not part of the hamseg library."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Optional

from mmengine.config import Config
from mmseg.registry import MODELS

from hamseg.apis.head_record import HeadRecord, differences, of_head
from hamseg.compat.checkpoint import load_checkpoint_file
from hamseg.utils.errors import UsageError


class HeadMismatchError(UsageError):
    """Two records of a head disagree; the one-line message names both."""


def of_config(cfg: Config, source: str) -> Optional[HeadRecord]:
    """The record of ``cfg``'s decode head, built from it (random weights); None unless it has
    one. ``source`` names the config in messages, followed by the ham entry it has."""
    head_cfg = cfg.get("model", {}).get("decode_head")
    if not isinstance(head_cfg, Mapping):
        return None
    with warnings.catch_warnings():  # mmseg's loss builders warn about training options
        warnings.simplefilter("ignore")
        head = MODELS.build(head_cfg)
    entry = next((k for k in ("ham_cfg", "ham_kwargs") if head_cfg.get(k) is not None), None)
    return of_head(head, f"{source}'s {entry}" if entry else source)


def _stored_config(meta: Mapping) -> Optional[HeadRecord]:
    """The record of the training config mmengine stores in a checkpoint (``meta['cfg']``);
    None if it stores none or names a type that is not registered here."""
    if not meta.get("cfg"):
        return None
    try:
        return of_config(Config.fromstring(meta["cfg"], ".py"), "its stored config")
    except KeyError:  # a type of another code base (the strict load compared the weights)
        return None


def check_checkpoint(cfg: Config, checkpoint: str, fix: str) -> None:
    """Raise one line if the training config stored in ``checkpoint`` (its ``ham_cfg``, mmseg's
    ``ham_kwargs`` or its head's default ham) records another decode head, ham or class count
    than ``cfg`` (its keys and shapes are the strict load's to compare). ``fix``: what to do.

    Raises:
        HeadMismatchError: What the checkpoint says, where, and what the config says.
    """
    loaded = load_checkpoint_file(checkpoint)
    stored = _stored_config(loaded.get("meta") or {} if isinstance(loaded, Mapping) else {})
    wanted = of_config(cfg, "the config") if stored is not None else None
    if found := wanted and differences(stored, wanted):
        raise HeadMismatchError(
            f"{checkpoint} was trained with decode_head {found[0]} ({stored.source}) but the "
            f"config has {found[1]}: {fix}"
        )
