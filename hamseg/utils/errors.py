"""The library's user-facing errors: bad input a user can fix, reported by the tools in one line
(``hamseg.cli.run_cli``: exit code 2)."""

from __future__ import annotations

import os.path as osp

__all__ = ["UsageError", "require_file"]


class UsageError(ValueError):
    """A bad option, file or config value; the message is one line saying what to do."""


def require_file(path: str, what: str) -> str:
    """``path`` if it is a file.

    Raises:
        FileNotFoundError: ``"<what> not found: <path>"``.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    return path
