"""Pieces of the one-line messages that hamseg's checks and tools print."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["first_items"]


def first_items(items: Sequence[Any], limit: int) -> str:
    """The first ``limit`` of ``items`` joined by ", ", then ", ..." if there are more.

    Args:
        items: What a message lists (class names, label values).
        limit: How many to show at most.

    Returns:
        E.g. ``"a, b, c, ..."`` for ``first_items("abcde", 3)``.
    """
    return ", ".join(map(str, items[:limit])) + (", ..." if len(items) > limit else "")
