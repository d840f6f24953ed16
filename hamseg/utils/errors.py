"""User-facing errors and their one-line messages (exit code 2 in the tools: hamseg.cli.run_cli)."""

import os.path as osp
import pickle
import re
from collections.abc import Sequence
from typing import Any


class UsageError(ValueError):
    """A bad option, file or config value; the message is one line saying what to do."""


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint holds pickled objects other than weights; it was not loaded."""


class CorruptCheckpointError(RuntimeError):
    """A checkpoint file is truncated or not a torch checkpoint at all."""


def require_file(path: str, what: str) -> str:
    """``path`` if it is a file, else ``FileNotFoundError("<what> not found: <path>")``."""
    if not osp.isfile(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    return path


def first_items(items: Sequence[Any], limit: int) -> str:
    """The first ``limit`` items joined by ", ", then " and N more" if there are N more."""
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(map(str, items[:limit])) + more


def one_line(err: BaseException | str, limit: int | None = None) -> str:
    """A message on one line, at most ``limit`` characters; a DataLoader worker's error: the
    original error's own message."""
    text = str(err)
    if isinstance(err, BaseException) and "in DataLoader worker process" in text:
        name = re.escape(type(err).__name__)
        heads = list(re.finditer(rf"\n(?:[\w.]+\.)?{name}: ", text))
        text = text[heads[-1].end() :] if heads else text
    return " ".join(text.split())[:limit]
