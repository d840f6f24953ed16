"""The library's user-facing errors: bad input a user can fix, which the tools report in one
line with exit code 2 (:func:`hamseg.cli.run_cli`)."""

from __future__ import annotations

import os.path as osp


class UsageError(ValueError):
    """A bad option, file or config value; the message is one line saying what to do."""


def require_file(path: str, what: str) -> str:
    """``path`` if it is a file, else ``FileNotFoundError("<what> not found: <path>")``."""
    if not osp.isfile(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    return path
