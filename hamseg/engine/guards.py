"""The hooks ``tools/train.py`` adds to every training config, hamseg's or a plain mmseg one.

:func:`add_guard_hooks` appends one of each guard to ``cfg.custom_hooks`` unless the config
already lists a hook of that class (under any registered name); then the config's own entry and
options win, e.g. ``custom_hooks = [dict(type='PreemptionHook', requeue=False)]``. The entries
use scoped type names (``mmseg.PreemptionHook``), so they resolve whatever the config's
``default_scope`` is.
"""

from __future__ import annotations

from mmengine.config import Config
from mmseg.registry import HOOKS

from .divergence import NonFiniteLossHook
from .preemption import PreemptionHook
from .random_state import RandomStateHook

__all__ = ["GUARD_HOOKS", "add_guard_hooks"]

#: The guards, in the order they are added.
GUARD_HOOKS = (PreemptionHook, NonFiniteLossHook, RandomStateHook)


def _hook_class(entry) -> type | None:
    """The class a ``custom_hooks`` entry (dict, class or hook object) builds, if known."""
    kind = entry.get("type") if isinstance(entry, dict) else entry
    if isinstance(kind, str):
        return HOOKS.get(kind)
    return kind if isinstance(kind, type) else type(kind)


def add_guard_hooks(cfg: Config) -> list[str]:
    """Append the guard hooks the config does not configure itself.

    Args:
        cfg: A training config (changed in place).

    Returns:
        The type names added.
    """
    hooks = list(cfg.get("custom_hooks") or [])
    present = [_hook_class(entry) for entry in hooks]
    added = []
    for guard in GUARD_HOOKS:
        if not any(isinstance(cls, type) and issubclass(cls, guard) for cls in present):
            added.append(f"mmseg.{guard.__name__}")
            hooks.append(dict(type=added[-1]))
    cfg.custom_hooks = hooks
    return added
