"""Crash-safe checkpoints: mmengine 0.10.7 writes a checkpoint in place, so a kill mid-write leaves
a truncated file. :class:`AtomicCheckpointHook` writes local ones through a temporary file and
``os.replace``, and a bare ``--resume`` never picks a partial file, whatever ``last_checkpoint``
(still written in place by mmengine) says. docs/robustness.md, "Crash-safe checkpoints"."""

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

#: Name of :class:`AtomicLocalBackend` in mmengine's file backends (``backend_args``).
ATOMIC_BACKEND = "hamseg_atomic_local"
_PERIODIC = re.compile(r"^(?:iter|epoch)_(\d+)\.pth$")  # CheckpointHook's default names


class AtomicLocalBackend(LocalBackend):
    """mmengine's ``LocalBackend`` whose ``put`` writes ``dir/.name.tmp``, then ``os.replace``-s
    it: on any error (a signal too) the temporary file goes and ``filepath`` stays as it was."""

    def put(self, obj: bytes, filepath: str | Path) -> None:
        directory, name = osp.split(osp.abspath(filepath))
        os.makedirs(directory, exist_ok=True)
        temp = osp.join(directory, f".{name}.tmp")  # hidden, and never matched by *.pth
        try:
            with open(temp, "wb") as handle:
                handle.write(obj)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, filepath)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(temp)
            raise


register_backend(ATOMIC_BACKEND, AtomicLocalBackend)


@HOOKS.register_module()
class AtomicCheckpointHook(CheckpointHook):
    """mmengine's ``CheckpointHook`` (same options) writing local checkpoints atomically."""

    def __init__(self, **kwargs) -> None:
        backend_args = kwargs.get("backend_args") or {}
        remote = "://" in str(kwargs.get("out_dir")) or kwargs.get("file_client_args")
        if not remote and backend_args.get("backend", "local") == "local":
            kwargs["backend_args"] = dict(backend_args, backend=ATOMIC_BACKEND)
        super().__init__(**kwargs)


def find_latest_complete_checkpoint(work_dir: str) -> str | None:
    """The checkpoint a bare ``--resume`` continues from: ``last_checkpoint``'s target if it is
    complete, else the newest complete ``iter_N.pth``/``epoch_N.pth`` in its folder or
    ``work_dir``. Temporary files of killed writes there are removed."""
    pointer = osp.join(work_dir, "last_checkpoint")
    target = Path(pointer).read_text().strip() if osp.isfile(pointer) else ""
    folders = [
        f for f in dict.fromkeys([osp.dirname(target) or work_dir, work_dir]) if osp.isdir(f)
    ]
    found = []
    for folder in folders:
        for name in os.listdir(folder):
            if name.startswith(".") and name.endswith(".tmp") and _PERIODIC.match(name[1:-4]):
                os.remove(osp.join(folder, name))
                print_log(f"Removed a partially written file: {name}", logger="current")
            elif match := _PERIODIC.match(name):
                found.append((int(match.group(1)), osp.join(folder, name)))
    if target and is_complete_checkpoint(target):
        return target
    latest = next((p for _, p in sorted(found, reverse=True) if is_complete_checkpoint(p)), None)
    why = f"names {target}, which is missing or incomplete" if target else "is missing or empty"
    print_log(f"{pointer} {why}; newest complete checkpoint: {latest}", logger="current")
    return latest
