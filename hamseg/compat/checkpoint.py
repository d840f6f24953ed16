"""mmengine 0.10.7 checkpoints under torch >= 2.6's ``weights_only`` loads (mmengine#1655):
mmengine's types allow-listed, ``HistoryBuffer``'s pickle trimmed of ``getattr``, a refused or
broken file named in one line; nothing where mmengine's loader sets ``weights_only`` itself."""

import contextlib
import inspect
import io
import os
import pickle
import zipfile
from typing import Any

import numpy as np
import torch
from mmengine.logging.history_buffer import HistoryBuffer
from mmengine.runner import checkpoint as mmengine_checkpoint
from mmengine.runner.checkpoint import CheckpointLoader

from hamseg.utils.errors import CorruptCheckpointError, UnsafeCheckpointError

try:  # numpy >= 2 pickles numpy._core paths, numpy 1.x numpy.core
    from numpy._core.multiarray import _reconstruct, scalar
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core.multiarray import _reconstruct, scalar

#: The non-tensor types mmengine writes into checkpoints (HistoryBuffer, numpy values).
MMENGINE_CHECKPOINT_TYPES = [HistoryBuffer, _reconstruct, scalar, np.ndarray, np.dtype]
MMENGINE_CHECKPOINT_TYPES += [
    type(np.dtype(c)) for c in ("float64", "float32", "int64", "int32", "bool")
]


def is_complete_checkpoint(path: str) -> bool:
    """Whether ``path`` is a whole torch (zip) file: a cut write loses the zip's end."""
    try:
        with zipfile.ZipFile(path) as archive:
            return any(name.endswith("data.pkl") for name in archive.namelist())
    except (zipfile.BadZipFile, OSError, EOFError):
        return False


def _load_checkpoint(cls: type, filename: str, map_location: Any = None, logger: Any = None):
    """mmengine's ``CheckpointLoader.load_checkpoint``, its failures one line naming the file."""
    broken = os.path.isfile(filename) and not is_complete_checkpoint(filename)
    try:
        return cls._mmengine_load_checkpoint(filename, map_location, logger or "current")
    except Exception as err:
        refused = isinstance(err, pickle.UnpicklingError)
        if refused and "Weights only load failed" in str(err) and not broken:
            names = ["objects torch does not allow"]
            with contextlib.suppress(Exception):  # reads data.pkl's opcodes: runs nothing
                names = sorted(torch.serialization.get_unsafe_globals_in_checkpoint(filename))
            raise UnsafeCheckpointError(
                f"Refused to load checkpoint {filename!r}: it holds pickled objects that are not "
                f"weights ({', '.join(names)}); nothing in it was executed. Only if you trust its "
                "source, re-save its tensors alone (torch.save({'state_dict': state_dict}, "
                "'clean.pth') in a separate session) and load that file."
            ) from None
        if not (refused or broken):
            raise
        raise CorruptCheckpointError(
            f"Checkpoint {filename!r} is truncated or not a torch checkpoint (an interrupted "
            f"write or copy?); use another one. Reader error: {type(err).__name__}: {err}"
        ) from err


def load_checkpoint_file(filename: str, map_location: Any = "cpu") -> Any:
    """A checkpoint (a path or any mmengine URL) through mmengine's loader."""
    return CheckpointLoader.load_checkpoint(filename, map_location=map_location)


def _history_buffer_state(self: HistoryBuffer) -> dict:
    """``HistoryBuffer.__getstate__`` without the default statistics functions."""
    state = {k: v for k, v in self.__dict__.items() if k != "statistics_methods"}
    defaults = ("min", "max", "current", "mean")
    custom = {k: v for k, v in self._statistics_methods.items() if k not in defaults}
    return dict(state, statistics_methods=custom) if custom else state


#: Whether mmengine's loader leaves ``weights_only`` to torch (0.10.7 does).
LOADER_USES_TORCH_DEFAULT = "weights_only" not in inspect.getsource(
    mmengine_checkpoint.load_from_local
)
_pickled = io.BytesIO()
torch.save(HistoryBuffer(), _pickled)
_pickled.seek(0)
#: Whether mmengine's own HistoryBuffer pickles a call of ``getattr`` (read before the trim).
UPSTREAM_PICKLES_GETATTR = "builtins.getattr" in (
    torch.serialization.get_unsafe_globals_in_checkpoint(_pickled)
)


def install() -> bool:
    """Apply the adaptation where the installed mmengine needs it (idempotent); whether it did."""
    if not LOADER_USES_TORCH_DEFAULT:
        return False
    if UPSTREAM_PICKLES_GETATTR:
        HistoryBuffer.__getstate__ = _history_buffer_state
    torch.serialization.add_safe_globals(MMENGINE_CHECKPOINT_TYPES)
    if not hasattr(CheckpointLoader, "_mmengine_load_checkpoint"):
        CheckpointLoader._mmengine_load_checkpoint = CheckpointLoader.load_checkpoint
        CheckpointLoader.load_checkpoint = classmethod(_load_checkpoint)
    return True


INSTALLED: bool = install()
