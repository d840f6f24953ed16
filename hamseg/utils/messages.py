"""Pieces of hamseg's one-line messages."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any


def first_items(items: Sequence[Any], limit: int) -> str:
    """The first ``limit`` items joined by ", ", then ", ..." if there are more."""
    return ", ".join(map(str, items[:limit])) + (", ..." if len(items) > limit else "")


def one_line(err: BaseException | str, limit: int | None = None) -> str:
    """A message on one line (runs of whitespace become one space), at most ``limit`` chars;
    for an error re-raised from a DataLoader worker, the original error's own message."""
    text = str(err)
    if isinstance(err, BaseException) and "in DataLoader worker process" in text:
        name = re.escape(type(err).__name__)
        heads = list(re.finditer(rf"\n(?:[\w.]+\.)?{name}: ", text))
        text = text[heads[-1].end() :] if heads else text
    return " ".join(text.split())[:limit]
