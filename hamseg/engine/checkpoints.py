"""Crash-safe checkpoints: mmengine 0.10.7 writes a checkpoint in place, so a kill mid-write leaves
a truncated file. :class:`AtomicCheckpointHook` writes local ones through a temporary file and
``os.replace``, and a bare ``--resume`` never picks a partial file, whatever ``last_checkpoint``
(still written in place by mmengine) says. docs/robustness.md, "Crash-safe checkpoints"."""

from __future__ import annotations

import contextlib
import os
import os.path as osp
import re
from pathlib import Path

from mmengine.fileio import LocalBackend, register_backend
from mmengine.hooks import CheckpointHook
from mmengine.logging import print_log
from mmseg.registry import HOOKS

from hamseg.compat.checkpoint import is_complete_checkpoint

from .resume import gather_rng_states

#: Name of :class:`AtomicLocalBackend` in mmengine's file backends (``backend_args``).
ATOMIC_BACKEND = "hamseg_atomic_local"
_PERIODIC = re.compile(r"^(?:iter|epoch)_(\d+)\.pth$")  # CheckpointHook's default names


def atomic_write(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``dir/.name.tmp``, fsync, ``os.replace`` onto ``path``, fsync the
    folder; on any error (a signal too) the temporary file goes and ``path`` stays as it was."""
    directory, name = osp.split(osp.abspath(os.fspath(path)))
    os.makedirs(directory, exist_ok=True)
    temp = osp.join(directory, f".{name}.tmp")  # hidden, and never matched by *.pth
    try:
        with open(temp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, osp.join(directory, name))
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temp)
        raise
    with contextlib.suppress(OSError):  # persist the rename where the platform can
        fd = os.open(directory, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)


class AtomicLocalBackend(LocalBackend):
    """mmengine's ``LocalBackend`` whose ``put``/``put_text`` go through :func:`atomic_write`."""

    def put(self, obj: bytes, filepath: str | Path) -> None:
        atomic_write(filepath, obj)

    def put_text(self, obj: str, filepath: str | Path, encoding: str = "utf-8") -> None:
        atomic_write(filepath, obj.encode(encoding))


register_backend(ATOMIC_BACKEND, AtomicLocalBackend)


@HOOKS.register_module()
class AtomicCheckpointHook(CheckpointHook):
    """mmengine's ``CheckpointHook`` (same options) writing local checkpoints atomically, with
    every rank's random states (remote stores keep mmengine's writes)."""

    def __init__(self, **kwargs) -> None:
        backend_args = kwargs.get("backend_args") or {}
        remote = "://" in str(kwargs.get("out_dir") or "") or kwargs.get("file_client_args")
        if not remote and backend_args.get("backend", "local") == "local":
            kwargs["backend_args"] = dict(backend_args, backend=ATOMIC_BACKEND)
        super().__init__(**kwargs)

    def _save_checkpoint_with_step(self, runner, step: int, meta: dict) -> None:
        """Every rank gathers the random states first (mmengine's method, pinned by
        tests/engine/test_upstream_pins.py, then saves on the main rank only)."""
        gather_rng_states(runner)
        super()._save_checkpoint_with_step(runner, step, meta)


def find_latest_complete_checkpoint(work_dir: str) -> str | None:
    """The checkpoint a bare ``--resume`` continues from: ``last_checkpoint``'s target if it is
    complete, else the complete ``iter_N.pth``/``epoch_N.pth`` with the highest N in its folder
    or ``work_dir`` (None if none). Temporary files of killed writes there are removed."""
    pointer = osp.join(work_dir, "last_checkpoint")
    target = Path(pointer).read_text().strip() if osp.isfile(pointer) else ""
    folders = dict.fromkeys([osp.dirname(target) or work_dir, work_dir])  # ordered, unique
    folders = [folder for folder in folders if osp.isdir(folder)]
    for folder in folders:
        for name in os.listdir(folder):
            if name.startswith(".") and name.endswith(".tmp") and _PERIODIC.match(name[1:-4]):
                os.remove(osp.join(folder, name))
                print_log(f"Removed a partially written file: {name}", logger="current")
    if target and is_complete_checkpoint(target):
        return target
    found = [
        (int(match.group(1)), osp.join(folder, name))
        for folder in folders
        for name in os.listdir(folder)
        if (match := _PERIODIC.match(name))
    ]
    latest = next((p for _, p in sorted(found, reverse=True) if is_complete_checkpoint(p)), None)
    why = f"names {target}, which is missing or incomplete" if target else "is missing or empty"
    print_log(f"{pointer} {why}; newest complete checkpoint: {latest}", logger="current")
    return latest
