"""mmengine 0.10.7 checkpoints under torch >= 2.6's ``weights_only=True`` loads.

torch 2.6 unpickles only allow-listed types; mmengine 0.10.7's ``HistoryBuffer`` (numpy values;
its pickle calls ``getattr``) made ``--resume`` fail with an ``UnpicklingError`` (upstream:
open-mmlab/mmengine#1655; the fix proposed there, open-mmlab/mmengine#1650, turns
``weights_only`` off). :func:`install` allow-lists those types, trims the buffer's pickle where
mmengine's own needs ``getattr`` (:data:`UPSTREAM_PICKLES_GETATTR`), and keeps ``weights_only``
on in every mmengine load, with one-line errors (:class:`UnsafeCheckpointError`,
:class:`CorruptCheckpointError`). docs/robustness.md, "Safe checkpoint loading";
tests/compat/test_upstream_canaries.py says when mmengine no longer needs it.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import pickle
import re
import zipfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from mmengine.logging.history_buffer import HistoryBuffer
from mmengine.runner.checkpoint import CheckpointLoader

try:  # numpy >= 2 pickles numpy._core paths, numpy 1.x numpy.core
    from numpy._core.multiarray import _reconstruct, scalar
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core.multiarray import _reconstruct, scalar

#: The non-tensor types mmengine writes into checkpoints (HistoryBuffer, numpy values).
MMENGINE_CHECKPOINT_TYPES: list = [HistoryBuffer, _reconstruct, scalar, np.ndarray, np.dtype]
MMENGINE_CHECKPOINT_TYPES += [
    type(np.dtype(c)) for c in ("float64", "float32", "int64", "int32", "bool")
]
_DEFAULT_STATISTICS = ("min", "max", "current", "mean")


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint holds pickled objects other than weights; it was not loaded."""


class CorruptCheckpointError(RuntimeError):
    """A checkpoint file is truncated or not a torch checkpoint at all."""


def is_complete_checkpoint(path: str) -> bool:
    """Whether ``path`` is a complete torch (zip) checkpoint: a write cut short loses the zip's
    central directory at its end, so this rejects truncated files without reading tensors."""
    try:
        with zipfile.ZipFile(path) as archive:
            return any(name.endswith("data.pkl") for name in archive.namelist())
    except (zipfile.BadZipFile, OSError, EOFError):
        return False


@contextlib.contextmanager
def _weights_only_forced() -> Iterator[None]:
    """``TORCH_FORCE_WEIGHTS_ONLY_LOAD=1`` and no ``..._NO_...`` inside, restored after."""
    keys = ("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
    saved = {key: os.environ.pop(key, None) for key in keys}
    os.environ[keys[0]] = "1"
    try:
        yield
    finally:
        os.environ.pop(keys[0])
        os.environ.update({k: v for k, v in saved.items() if v is not None})


def _unsafe_message(filename: str, err: Exception) -> str:
    names: list[str] = []
    with contextlib.suppress(Exception):  # static disassembly of data.pkl: runs nothing
        names = sorted(torch.serialization.get_unsafe_globals_in_checkpoint(filename))
    names = names or sorted(set(re.findall(r"GLOBAL ([\w.]+)", str(err))))
    return (
        f"Refused to load checkpoint {filename!r}: it contains pickled Python objects that are "
        f"not weights ({', '.join(names) or 'objects torch does not allow'}). Checkpoints are "
        "loaded with torch.load(weights_only=True), so nothing in the file was executed. A "
        "pickled callable can run arbitrary code when unpickled: only if you trust where the "
        "file comes from, re-save its tensors alone (e.g. torch.save({'state_dict': "
        "state_dict}, 'clean.pth') in a separate session) and load that file instead."
    )


def _safe(load: Any) -> Any:
    """``CheckpointLoader.load_checkpoint`` with ``weights_only`` forced and one-line errors."""

    @functools.wraps(load)
    def load_checkpoint(
        cls: type, filename: str, map_location: Any = None, logger: Any = "current"
    ):
        def broken() -> bool:  # a local file that is not a complete zip archive
            return os.path.isfile(filename) and not is_complete_checkpoint(filename)

        with _weights_only_forced():
            try:
                return load(cls, filename, map_location, logger)
            except (UnsafeCheckpointError, FileNotFoundError, PermissionError, IsADirectoryError):
                raise
            except pickle.UnpicklingError as err:
                if "Weights only load failed" in str(err) and not broken():
                    raise UnsafeCheckpointError(_unsafe_message(filename, err)) from None
                raise CorruptCheckpointError(
                    f"Checkpoint {filename!r} is corrupt or not a torch checkpoint: {err}"
                ) from err
            except Exception as err:
                if not broken():
                    raise
                raise CorruptCheckpointError(
                    f"Checkpoint {filename!r} is truncated or is not a torch checkpoint (an "
                    f"interrupted write or copy?); use another checkpoint. Reader error: "
                    f"{type(err).__name__}: {err}"
                ) from err

    load_checkpoint._hamseg_safe = True  # type: ignore[attr-defined]
    return classmethod(load_checkpoint)


def load_checkpoint_file(filename: str, map_location: Any = "cpu") -> Any:
    """Load a checkpoint (a path or any mmengine URL) through the safe loader: raises
    :class:`UnsafeCheckpointError`, :class:`CorruptCheckpointError` or FileNotFoundError."""
    return CheckpointLoader.load_checkpoint(filename, map_location=map_location)


def _history_buffer_state(self: HistoryBuffer) -> dict:
    """``HistoryBuffer.__getstate__`` without the default statistics functions."""
    state = {k: v for k, v in self.__dict__.items() if k != "statistics_methods"}
    custom = {k: v for k, v in self._statistics_methods.items() if k not in _DEFAULT_STATISTICS}
    return dict(state, statistics_methods=custom) if custom else state


def _pickles_getattr() -> bool:
    """Whether mmengine's own ``HistoryBuffer`` pickles a call of ``getattr``, which
    ``weights_only`` loads refuse (mmengine 0.10.7 does)."""
    if getattr(HistoryBuffer.__getstate__, "_hamseg", False):
        return True  # already trimmed by an earlier install()
    buffer = io.BytesIO()
    torch.save(HistoryBuffer(), buffer)
    buffer.seek(0)
    return "builtins.getattr" in torch.serialization.get_unsafe_globals_in_checkpoint(buffer)


_history_buffer_state._hamseg = True  # type: ignore[attr-defined]
#: Whether the installed mmengine's HistoryBuffer needed trimming (read before it is trimmed).
UPSTREAM_PICKLES_GETATTR: bool = _pickles_getattr()


def install() -> None:
    """Allow-list mmengine's types, trim the buffer's state where needed, wrap the loader;
    idempotent."""
    if UPSTREAM_PICKLES_GETATTR:
        HistoryBuffer.__getstate__ = _history_buffer_state
    torch.serialization.add_safe_globals(MMENGINE_CHECKPOINT_TYPES)
    load = CheckpointLoader.__dict__["load_checkpoint"].__func__
    if not getattr(load, "_hamseg_safe", False):
        CheckpointLoader.load_checkpoint = _safe(load)


install()
