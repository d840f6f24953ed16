"""Crash-safe checkpoints: atomic writes and a resume that never picks up a partial file.

mmengine 0.10.7 writes a checkpoint by serialising it in memory and then writing the bytes into
the final file name, and records the latest one by rewriting ``<work_dir>/last_checkpoint`` in
place. A job killed (SIGKILL, OOM killer, pre-emption) during either write leaves a truncated
``iter_N.pth`` or an empty pointer, and ``--resume`` then fails or loads garbage.

:func:`install` changes three things, only for local files:

1. ``save_checkpoint`` (every name mmengine binds it to) writes into a hidden temporary file
   next to the target (``.iter_N.pth.tmp``), flushes and ``fsync``-s it, then ``os.replace``-s
   it onto the final name and ``fsync``-s the directory. The final name therefore only ever
   holds a complete checkpoint. Remote backends (``s3://``, ``pavi://``, ...) are untouched.
2. The ``last_checkpoint`` pointer written by ``CheckpointHook`` goes through the same
   temporary-file-and-rename (a module-level ``open`` in ``mmengine.hooks.checkpoint_hook`` that
   only intercepts writes to a file named ``last_checkpoint``).
3. ``find_latest_checkpoint`` (used by ``resume=True`` without a path) checks that the pointer
   names an existing, complete checkpoint. If it does not (pointer missing, empty, stale, or a
   checkpoint written before this fix and cut short), the newest complete ``iter_*.pth`` /
   ``epoch_*.pth`` in the work dir is used instead, and left-over temporary files are removed.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import os.path as osp
import re
import zipfile
from typing import IO, Any, Optional

import torch
from mmengine.logging import print_log

__all__ = [
    "TEMP_SUFFIX",
    "atomic_save_checkpoint",
    "find_latest_complete_checkpoint",
    "install",
    "is_complete_checkpoint",
]

#: Suffix of the hidden temporary file a checkpoint is written to before the rename.
TEMP_SUFFIX = ".tmp"
#: Names of periodic checkpoints written by mmengine's CheckpointHook (default templates).
_PERIODIC = re.compile(r"^(?:iter|epoch)_(\d+)\.pth$")
_POINTER = "last_checkpoint"


def _temp_path(filename: str) -> str:
    """``dir/.name.tmp`` for ``dir/name``: hidden, and never matched by ``*.pth``."""
    head, tail = osp.split(filename)
    return osp.join(head, f".{tail}{TEMP_SUFFIX}")


def _fsync_dir(path: str) -> None:
    """Persist a rename in ``path`` (a directory); silently skipped where unsupported."""
    with contextlib.suppress(OSError):
        fd = os.open(path or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(filename: str, write: Any, mode: str = "wb") -> None:
    """Write a file through a temporary file, ``fsync`` and ``os.replace``.

    Args:
        filename: Final path.
        write: Callable receiving the open temporary file object.
        mode: 'wb' or 'w'.
    """
    filename = osp.abspath(osp.expanduser(filename))
    directory = osp.dirname(filename)
    os.makedirs(directory, exist_ok=True)
    temp = _temp_path(filename)
    try:
        with builtins.open(temp, mode) as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, filename)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temp)
        raise
    _fsync_dir(directory)


def _is_local(filename: str, backend_args: Optional[dict]) -> bool:
    if backend_args and backend_args.get("backend", "local") != "local":
        return False
    return "://" not in filename


def atomic_save_checkpoint(
    checkpoint: dict,
    filename: str,
    file_client_args: Optional[dict] = None,
    backend_args: Optional[dict] = None,
) -> None:
    """Drop-in for ``mmengine.runner.checkpoint.save_checkpoint``, atomic for local files.

    Args:
        checkpoint: The checkpoint dict.
        filename: Target path (local) or URL (delegated to mmengine's writer).
        file_client_args: Deprecated mmengine argument; any value delegates to mmengine.
        backend_args: mmengine file backend arguments; a non-local backend delegates.
    """
    if file_client_args is not None or not _is_local(filename, backend_args):
        _ORIGINAL["save_checkpoint"](checkpoint, filename, file_client_args, backend_args)
        return
    atomic_write_bytes(filename, lambda handle: torch.save(checkpoint, handle))


class _AtomicTextFile(io.StringIO):
    """A text buffer that lands on disk atomically when closed, unless an exception is raised
    inside its ``with`` block (then the previous file stays as it was)."""

    def __init__(self, filename: str) -> None:
        super().__init__()
        self._target = filename
        self._discard = False

    def close(self) -> None:
        if not self.closed and not self._discard:
            text = self.getvalue()
            atomic_write_bytes(self._target, lambda handle: handle.write(text), mode="w")
        super().close()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._discard = exc_type is not None
        self.close()


def _hook_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> IO:
    """``open`` for mmengine's checkpoint_hook module: atomic writes of the pointer file only."""
    if (
        isinstance(file, (str, os.PathLike))
        and osp.basename(os.fspath(file)) == _POINTER
        and mode == "w"
        and not args
        and not kwargs
    ):
        return _AtomicTextFile(os.fspath(file))
    return builtins.open(file, mode, *args, **kwargs)


def is_complete_checkpoint(path: str) -> bool:
    """Whether ``path`` is a complete torch (zip) checkpoint: its central directory is readable.

    A write cut short loses the central directory at the end of the archive, so this rejects
    truncated files without reading the tensors.
    """
    if not osp.isfile(path):
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            return any(name.endswith("data.pkl") for name in archive.namelist())
    except (zipfile.BadZipFile, OSError, EOFError):
        return False


def _remove_temp_files(directory: str) -> None:
    if not osp.isdir(directory):
        return
    for name in os.listdir(directory):
        if name.startswith(".") and name.endswith(TEMP_SUFFIX):
            if _PERIODIC.match(name[1 : -len(TEMP_SUFFIX)]) or name[1:].startswith(_POINTER):
                with contextlib.suppress(OSError):
                    os.remove(osp.join(directory, name))
                    print_log(f"Removed a partially written file: {name}", logger="current")


def find_latest_complete_checkpoint(path: str) -> Optional[str]:
    """The checkpoint to resume from in work dir ``path``, never a partially written one.

    Args:
        path: The work dir (where ``last_checkpoint`` is written).

    Returns:
        The pointer's target if it is a complete checkpoint, otherwise the complete periodic
        checkpoint with the highest step in the pointer's directory or in ``path``; None if
        there is none.
    """
    pointer = osp.join(path, _POINTER)
    target: Optional[str] = None
    if osp.isfile(pointer):
        with builtins.open(pointer) as handle:
            target = handle.read().strip() or None
    candidates_dirs = [path]
    if target is not None:
        candidates_dirs.insert(0, osp.dirname(target) or path)
    for directory in candidates_dirs:
        _remove_temp_files(directory)
    if target is not None and is_complete_checkpoint(target):
        return target

    best: Optional[tuple[int, str]] = None
    for directory in dict.fromkeys(candidates_dirs):
        if not osp.isdir(directory):
            continue
        for name in os.listdir(directory):
            match = _PERIODIC.match(name)
            full = osp.join(directory, name)
            if match and (best is None or int(match.group(1)) > best[0]):
                if is_complete_checkpoint(full):
                    best = (int(match.group(1)), full)
    found = best[1] if best else None
    if target is not None:
        why = f"{pointer} names {target}, which is missing or incomplete"
    else:
        why = f"{pointer} is missing or empty"
    print_log(f"{why}; newest complete checkpoint: {found}", logger="current")
    return found


_ORIGINAL: dict[str, Any] = {}


def install() -> None:
    """Patch mmengine's checkpoint writer, pointer writer and resume lookup; idempotent."""
    import mmengine.hooks.checkpoint_hook as hook_module
    import mmengine.runner as runner_pkg
    import mmengine.runner._flexible_runner as flexible_module
    import mmengine.runner.checkpoint as ckpt_module
    import mmengine.runner.runner as runner_module

    if _ORIGINAL:
        return
    _ORIGINAL["save_checkpoint"] = ckpt_module.save_checkpoint
    _ORIGINAL["find_latest_checkpoint"] = ckpt_module.find_latest_checkpoint
    for module in (ckpt_module, runner_pkg, runner_module):
        module.save_checkpoint = atomic_save_checkpoint
    for module in (ckpt_module, runner_pkg, runner_module, flexible_module):
        module.find_latest_checkpoint = find_latest_complete_checkpoint
    hook_module.open = _hook_open  # module global: shadows the builtin in that module only
