"""Crash-safe checkpoints: mmengine 0.10.7 writes a checkpoint and the ``last_checkpoint`` pointer
in place, so a kill mid-write leaves a truncated file. :class:`AtomicCheckpointHook` writes local
ones through a temporary file and ``os.replace``, and a bare ``--resume`` never picks a partial
file. docs/robustness.md, "Crash-safe checkpoints"."""

from __future__ import annotations

import contextlib
import os
import os.path as osp
import re
from pathlib import Path

from mmengine.dist import is_main_process
from mmengine.fileio import LocalBackend, register_backend
from mmengine.hooks import CheckpointHook
from mmengine.logging import print_log
from mmseg.registry import HOOKS

from hamseg.compat.checkpoint import is_complete_checkpoint

from .random_state import gather_rng_states

#: Name of :class:`AtomicLocalBackend` in mmengine's file backends (``backend_args``).
ATOMIC_BACKEND = "hamseg_atomic_local"
POINTER = "last_checkpoint"
_PERIODIC = re.compile(r"^(?:iter|epoch)_(\d+)\.pth$")  # CheckpointHook's default names


def atomic_write(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``dir/.name.tmp``, fsync, ``os.replace`` onto ``path``, fsync the
    folder; on any error (a signal too) the temporary file goes and ``path`` stays as it was."""
    path = osp.abspath(os.fspath(path))
    directory, name = osp.split(path)
    os.makedirs(directory, exist_ok=True)
    temp = osp.join(directory, f".{name}.tmp")  # hidden, and never matched by *.pth
    try:
        with open(temp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temp)
        raise
    with contextlib.suppress(OSError):  # persist the rename where the platform can
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
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
    """mmengine's ``CheckpointHook`` (same options) writing local checkpoints and the
    ``last_checkpoint`` pointer atomically, with every rank's random states (remote stores keep
    mmengine's writes)."""

    def __init__(self, **kwargs) -> None:
        backend_args = kwargs.get("backend_args") or {}
        remote = "://" in str(kwargs.get("out_dir") or "") or kwargs.get("file_client_args")
        if not remote and backend_args.get("backend", "local") == "local":
            kwargs["backend_args"] = dict(backend_args, backend=ATOMIC_BACKEND)
        super().__init__(**kwargs)

    def _save_checkpoint_with_step(self, runner, step: int, meta: dict) -> None:
        """mmengine 0.10.7's ``CheckpointHook._save_checkpoint_with_step`` (rotate, save, point),
        except that the pointer is replaced atomically instead of rewritten in place (the
        pointer write has no hook of its own; tests/compat/test_upstream_canaries.py pins the
        upstream method this follows)."""
        keep = getattr(self, "keep_ckpt_ids", None)  # set in before_train if max_keep_ckpts > 0
        if self.max_keep_ckpts > 0 and not (keep and keep[-1] == step):
            if len(keep) == self.max_keep_ckpts:
                old = self.file_backend.join_path(self.out_dir, self.filename_tmpl.format(keep[0]))
                keep.popleft()
                if is_main_process() and self.file_backend.isfile(old):
                    self.file_backend.remove(old)
                elif is_main_process() and self.file_backend.isdir(old):  # deepspeed's folders
                    self.file_backend.rmtree(old)
            keep.append(step)
            runner.message_hub.update_info("keep_ckpt_ids", list(keep))
        name = self.filename_tmpl.format(step)
        self.last_ckpt = self.file_backend.join_path(self.out_dir, name)
        runner.message_hub.update_info("last_ckpt", self.last_ckpt)
        gather_rng_states(runner)  # every rank; the main rank writes
        runner.save_checkpoint(
            self.out_dir,
            name,
            self.file_client_args,
            save_optimizer=self.save_optimizer,
            save_param_scheduler=self.save_param_scheduler,
            meta=meta,
            by_epoch=self.by_epoch,
            backend_args=self.backend_args,
            **self.args,
        )
        if is_main_process():
            atomic_write(osp.join(runner.work_dir, POINTER), str(self.last_ckpt).encode())


def find_latest_complete_checkpoint(work_dir: str) -> str | None:
    """The checkpoint a bare ``--resume`` continues from: ``last_checkpoint``'s target if it is
    complete, else the complete ``iter_N.pth``/``epoch_N.pth`` with the highest N in its folder
    or ``work_dir`` (None if none). Temporary files of killed writes there are removed."""
    pointer = osp.join(work_dir, POINTER)
    target = Path(pointer).read_text().strip() if osp.isfile(pointer) else ""
    folders = [*dict.fromkeys([osp.dirname(target) or work_dir, work_dir])]
    for folder in filter(osp.isdir, folders):
        for name in os.listdir(folder):
            if name.startswith(".") and name.endswith(".tmp"):
                if _PERIODIC.match(name[1:-4]) or name == f".{POINTER}.tmp":
                    os.remove(osp.join(folder, name))
                    print_log(f"Removed a partially written file: {name}", logger="current")
    if target and is_complete_checkpoint(target):
        return target
    found = [
        (int(match.group(1)), osp.join(folder, name))
        for folder in filter(osp.isdir, folders)
        for name in os.listdir(folder)
        if (match := _PERIODIC.match(name))
    ]
    latest = next((p for _, p in sorted(found, reverse=True) if is_complete_checkpoint(p)), None)
    why = f"names {target}, which is missing or incomplete" if target else "is missing or empty"
    print_log(f"{pointer} {why}; newest complete checkpoint: {latest}", logger="current")
    return latest
