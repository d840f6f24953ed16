"""Pieces of the one-line messages that hamseg's checks and tools print."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["first_items", "one_line"]


def first_items(items: Sequence[Any], limit: int) -> str:
    """The first ``limit`` of ``items`` joined by ", ", then ", ..." if there are more.

    Args:
        items: What a message lists (class names, label values).
        limit: How many to show at most.

    Returns:
        E.g. ``"a, b, c, ..."`` for ``first_items("abcde", 3)``.
    """
    return ", ".join(map(str, items[:limit])) + (", ..." if len(items) > limit else "")


def one_line(err: BaseException, limit: int | None = None) -> str:
    """An exception's message on one line (runs of whitespace, newlines too, become one space).

    Args:
        err: The exception, often a library's with a multi-line message.
        limit: Keep at most this many characters (None: all).
    """
    return " ".join(str(err).split())[:limit]
