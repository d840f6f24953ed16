"""Pieces of hamseg's one-line messages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def first_items(items: Sequence[Any], limit: int) -> str:
    """The first ``limit`` items joined by ", ", then ", ..." if there are more."""
    return ", ".join(map(str, items[:limit])) + (", ..." if len(items) > limit else "")


def one_line(err: BaseException | str, limit: int | None = None) -> str:
    """A message on one line (runs of whitespace become one space), at most ``limit`` chars."""
    return " ".join(str(err).split())[:limit]
