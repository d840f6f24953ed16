"""Crash-safe checkpoints: mmengine 0.10.7 writes them in place, a kill mid-write leaves a truncated
file (docs/robustness.md, "Crash-safe checkpoints")."""

import contextlib
import os
import os.path as osp
import re
from glob import glob
from pathlib import Path

from mmengine.fileio import LocalBackend, register_backend
from mmengine.hooks import CheckpointHook
from mmengine.logging import print_log
from mmseg.registry import HOOKS

from hamseg.compat.checkpoint import is_complete_checkpoint

#: Name of :class:`AtomicLocalBackend` in mmengine's file backends (``backend_args``).
ATOMIC_BACKEND = "hamseg_atomic_local"
_PERIODIC = re.compile(r"^(?:iter|epoch)_(\d+)\.pth$")  # CheckpointHook's default names


@register_backend(ATOMIC_BACKEND)
class AtomicLocalBackend(LocalBackend):
    """mmengine's ``LocalBackend`` writing ``dir/.name.tmp``, then ``os.replace``: on any error (a
    signal too) ``filepath`` stays as it was."""

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


@HOOKS.register_module()
class AtomicCheckpointHook(CheckpointHook):
    """mmengine's ``CheckpointHook`` (same options) writing local checkpoints atomically."""

    def __init__(self, **kwargs) -> None:
        local = {"backend": "local", **(kwargs.get("backend_args") or {})}  # remote: mmengine's
        if local["backend"] == "local" and "://" not in str(kwargs.get("out_dir")):
            kwargs["backend_args"] = dict(local, backend=ATOMIC_BACKEND)
        super().__init__(**kwargs)


def find_latest_complete_checkpoint(work_dir: str) -> str | None:
    """The checkpoint a bare ``--resume`` continues from: ``last_checkpoint``'s target if it is
    complete, else the newest complete ``iter_N.pth``/``epoch_N.pth`` in its folder or
    ``work_dir``. Temporary files of killed writes there are removed."""
    pointer = osp.join(work_dir, "last_checkpoint")
    target = Path(pointer).read_text().strip() if osp.isfile(pointer) else ""
    folders = {osp.dirname(target) or work_dir, work_dir}
    for temp in (path for folder in folders for path in glob(osp.join(folder, ".*_*.pth.tmp"))):
        os.remove(temp)
        print_log(f"Removed a partially written file: {temp}", logger="current")
    if target and is_complete_checkpoint(target):
        return target
    paths = [path for folder in folders for path in glob(osp.join(folder, "*_*.pth"))]
    found = [(int(m[1]), p) for p in paths if (m := _PERIODIC.match(osp.basename(p)))]
    latest = next((p for _, p in sorted(found, reverse=True) if is_complete_checkpoint(p)), None)
    why = f"names {target}, which is missing or incomplete" if target else "is missing or empty"
    print_log(f"{pointer} {why}; newest complete checkpoint: {latest}", logger="current")
    return latest
