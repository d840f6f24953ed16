"""Load checkpoints with torch's ``weights_only=True`` everywhere, and refuse unsafe ones clearly.

torch 2.6 made ``torch.load`` default to ``weights_only=True``: the unpickler only builds
allow-listed types. mmengine 0.10.7 calls ``torch.load`` without the argument and writes a few
non-tensor types into its checkpoints (the MessageHub's ``HistoryBuffer`` of logged scalars and
the numpy arrays and scalars inside it), so ``--resume`` fails with an ``UnpicklingError``.

:func:`install` does three things, nothing else:

1. adds exactly those mmengine types to torch's allow-list;
2. wraps ``mmengine.runner.CheckpointLoader.load_checkpoint`` (the one entry every mmengine and
   mmseg checkpoint load goes through: train resume, ``load_from``, test, ``init_model``,
   pretrained backbones, converters via :func:`load_checkpoint_file`) so that ``weights_only``
   stays on even if ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` is set in the environment;
3. turns torch's long ``UnpicklingError`` for a file that carries any other global (a pickled
   callable, say) into an :class:`UnsafeCheckpointError` naming the file and the offending
   globals. Nothing in such a file runs: the unpickler refuses before building anything.
   A truncated or corrupt file becomes a :class:`CorruptCheckpointError` naming the file.

One more thing stands in the way of resuming: ``HistoryBuffer.__getstate__`` also pickles its
table of statistics functions (``HistoryBuffer.min`` and co.), which protocol 2 writes as
``getattr(HistoryBuffer, 'min')``. Allow-listing ``getattr`` would open the unpickler to arbitrary
attribute access, so :func:`install` makes the buffer's state leave out the four default functions,
which ``HistoryBuffer.__setstate__`` registers again on load anyway (custom statistics added with
``HistoryBuffer.register_statistics`` are still written).
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import re
import zipfile
from collections.abc import Iterator
from typing import Any, Optional

import numpy as np
import torch
from mmengine.logging.history_buffer import HistoryBuffer
from mmengine.runner.checkpoint import CheckpointLoader

__all__ = [
    "MMENGINE_CHECKPOINT_TYPES",
    "CorruptCheckpointError",
    "UnsafeCheckpointError",
    "install",
    "load_checkpoint_file",
]

#: Environment switches of ``torch.load`` (read at every call).
_FORCE_SAFE_ENV = "TORCH_FORCE_WEIGHTS_ONLY_LOAD"
_FORCE_UNSAFE_ENV = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint holds pickled objects other than weights; it was not loaded."""


class CorruptCheckpointError(RuntimeError):
    """A checkpoint file is truncated or not a torch checkpoint at all."""


def _numpy_types() -> list:
    """The numpy globals that pickling ``np.ndarray``, ``np.dtype`` and numpy scalars writes."""
    try:  # numpy >= 2 writes numpy._core paths; numpy 1.x writes numpy.core
        from numpy._core.multiarray import _reconstruct, scalar
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core.multiarray import _reconstruct, scalar
    dtype_classes = [
        type(np.dtype(code)) for code in ("float64", "float32", "int64", "int32", "bool")
    ]
    return [_reconstruct, scalar, np.ndarray, np.dtype, *dtype_classes]


MMENGINE_CHECKPOINT_TYPES: list = [HistoryBuffer, *_numpy_types()]


@contextlib.contextmanager
def _weights_only_forced() -> Iterator[None]:
    """Make every ``torch.load`` inside use ``weights_only=True``, whatever the environment says.

    mmengine's loaders call ``torch.load`` without ``weights_only``; torch then honours
    ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``. For the duration of a checkpoint load that switch is
    replaced by ``TORCH_FORCE_WEIGHTS_ONLY_LOAD=1`` and the environment is restored afterwards.
    """
    saved = {key: os.environ.get(key) for key in (_FORCE_SAFE_ENV, _FORCE_UNSAFE_ENV)}
    os.environ[_FORCE_SAFE_ENV] = "1"
    os.environ.pop(_FORCE_UNSAFE_ENV, None)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _offending_globals(filename: str, err: Exception) -> list[str]:
    """Names of the globals torch refused, from the file itself or else from torch's message."""
    names: list[str] = []
    if os.path.isfile(filename):
        # Static disassembly of data.pkl: lists every non-allow-listed global, runs nothing.
        with contextlib.suppress(Exception):
            names = sorted(torch.serialization.get_unsafe_globals_in_checkpoint(filename))
    if not names:
        names = sorted(set(re.findall(r"GLOBAL ([\w.]+)", str(err))))
    return names


def _unsafe_message(filename: str, err: Exception) -> str:
    names = _offending_globals(filename, err)
    what = ", ".join(names) if names else "objects torch does not allow"
    return (
        f"Refused to load checkpoint {filename!r}: it contains pickled Python objects that are "
        f"not weights ({what}). Checkpoints are loaded with torch.load(weights_only=True), so "
        "nothing in the file was executed. A pickled callable can run arbitrary code when "
        "unpickled: only if you trust where the file comes from, re-save its tensors alone "
        "(e.g. torch.save({'state_dict': state_dict}, 'clean.pth') in a separate session) and "
        "load that file instead."
    )


def _is_broken_zip(filename: str) -> bool:
    """Whether a local file is not a readable zip archive (torch's format since 1.6)."""
    if not os.path.isfile(filename):
        return False
    try:
        with zipfile.ZipFile(filename) as archive:
            archive.namelist()
    except (zipfile.BadZipFile, OSError, EOFError):
        return True
    return False


def _install_safe_loader() -> None:
    """Wrap ``CheckpointLoader.load_checkpoint`` once (idempotent)."""
    current = CheckpointLoader.__dict__["load_checkpoint"].__func__
    if getattr(current, "_hamseg_safe", False):
        return

    @functools.wraps(current)
    def load_checkpoint(
        cls: type, filename: str, map_location: Any = None, logger: Any = "current"
    ) -> Any:
        with _weights_only_forced():
            try:
                return current(cls, filename, map_location, logger)
            except UnsafeCheckpointError:
                raise
            except pickle.UnpicklingError as err:
                if "Weights only load failed" in str(err) and not _is_broken_zip(filename):
                    raise UnsafeCheckpointError(_unsafe_message(filename, err)) from None
                raise CorruptCheckpointError(
                    f"Checkpoint {filename!r} is corrupt or not a torch checkpoint: {err}"
                ) from err
            except Exception as err:
                # Re-label errors of a file that is not a complete archive; keep all others.
                if isinstance(
                    err, (FileNotFoundError, PermissionError, IsADirectoryError)
                ) or not _is_broken_zip(filename):
                    raise
                raise CorruptCheckpointError(
                    f"Checkpoint {filename!r} is truncated or is not a torch checkpoint (an "
                    f"interrupted write or copy?); use another checkpoint. Reader error: "
                    f"{type(err).__name__}: {err}"
                ) from err

    load_checkpoint._hamseg_safe = True  # type: ignore[attr-defined]
    CheckpointLoader.load_checkpoint = classmethod(load_checkpoint)  # type: ignore[assignment]


def load_checkpoint_file(filename: str, map_location: Optional[Any] = "cpu") -> Any:
    """Load a checkpoint (local path or any mmengine URL scheme) safely.

    The entry point for hamseg's tools and converters: the same code path as mmengine's
    ``_load_checkpoint``, so ``weights_only=True`` and the clear refusal apply.

    Args:
        filename: Path or URL (``http(s)://``, ``open-mmlab://``, ``torchvision://``, ...).
        map_location: As for :func:`torch.load`.

    Returns:
        The loaded object (usually a dict with ``state_dict``/``meta`` or a bare state dict).

    Raises:
        UnsafeCheckpointError: The file carries non-weight globals; nothing in it ran.
        CorruptCheckpointError: The file is truncated or not a checkpoint.
        FileNotFoundError: A local path that does not exist.
    """
    return CheckpointLoader.load_checkpoint(filename, map_location=map_location)


_DEFAULT_STATISTICS = ("min", "max", "current", "mean")


def _history_buffer_state(self: HistoryBuffer) -> dict:
    """``HistoryBuffer.__getstate__`` without the default statistics functions (and no mutation)."""
    state = {k: v for k, v in self.__dict__.items() if k != "statistics_methods"}
    custom = {k: v for k, v in self._statistics_methods.items() if k not in _DEFAULT_STATISTICS}
    if custom:
        state["statistics_methods"] = custom
    return state


def install() -> None:
    """Allow-list mmengine's types and install the safe loader; idempotent.

    ``weights_only`` is never disabled.
    """
    HistoryBuffer.__getstate__ = _history_buffer_state
    torch.serialization.add_safe_globals(MMENGINE_CHECKPOINT_TYPES)
    _install_safe_loader()
