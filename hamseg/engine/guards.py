"""The hooks ``tools/train.py`` gives every training config, hamseg's or a plain mmseg one: the
guards (a config's own entry of one, under any registered name, wins with its options) and
:class:`~hamseg.engine.checkpoints.AtomicCheckpointHook` in place of ``CheckpointHook``."""

from __future__ import annotations

from typing import Any

from mmengine.config import Config
from mmengine.hooks import CheckpointHook
from mmseg.registry import HOOKS

from .divergence import NonFiniteLossHook
from .preemption import PreemptionHook
from .random_state import RandomStateHook

__all__ = ["GUARD_HOOKS", "add_guard_hooks"]

#: The guards, in the order they are added.
GUARD_HOOKS = (PreemptionHook, NonFiniteLossHook, RandomStateHook)


def _hook_class(entry: Any) -> Any:
    """The class a hook entry (dict, class or hook object) builds, if known."""
    kind = entry.get("type") if isinstance(entry, dict) else entry
    return (
        HOOKS.get(kind) if isinstance(kind, str) else kind if isinstance(kind, type) else type(kind)
    )


def add_guard_hooks(cfg: Config) -> list[str]:
    """Append the guards the config lacks; make its ``CheckpointHook`` an atomic one (options
    kept; a subclass of it is left alone). Scoped names resolve whatever ``default_scope`` is.

    Returns:
        The type names added or swapped in.
    """
    hooks = list(cfg.get("custom_hooks") or [])
    present = [cls for cls in map(_hook_class, hooks) if isinstance(cls, type)]
    added = [
        f"mmseg.{g.__name__}" for g in GUARD_HOOKS if not any(issubclass(c, g) for c in present)
    ]
    cfg.custom_hooks = hooks + [dict(type=name) for name in added]
    checkpoint = (cfg.get("default_hooks") or {}).get("checkpoint")
    if isinstance(checkpoint, dict) and _hook_class(checkpoint) is CheckpointHook:
        checkpoint["type"] = "mmseg.AtomicCheckpointHook"
        added.append(checkpoint["type"])
    return added
