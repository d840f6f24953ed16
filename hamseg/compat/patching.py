""":func:`patched`: an attribute of an upstream class or module replaced inside a block only."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

_ABSENT = object()


@contextlib.contextmanager
def patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    """``owner.name = value`` inside, restored after (raw: a staticmethod stays one; an
    attribute the object did not have is deleted again)."""
    original = vars(owner).get(name, _ABSENT)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if original is _ABSENT:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
