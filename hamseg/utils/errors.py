"""User-facing errors: bad input a user can fix, one line with exit code 2 in the tools
(:func:`hamseg.cli.run_cli`)."""

from __future__ import annotations

import os.path as osp
import pickle


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
