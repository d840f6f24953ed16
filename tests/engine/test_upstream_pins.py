"""The private upstream code hamseg.engine relies on, pinned: a failure here means upstream
changed it; re-check the engine code named in each test, then update the pin."""

from __future__ import annotations

import hashlib
import inspect

import mmengine.runner.runner as runner_module
from mmengine.hooks import CheckpointHook
from torch.utils.data import DataLoader


def digest(function) -> str:
    return hashlib.sha256(inspect.getsource(function).encode()).hexdigest()[:16]


def test_checkpoint_hooks_private_save_methods():
    """AtomicCheckpointHook overrides ``_save_checkpoint_with_step`` (gathers the random states
    first); PreemptionHook.save calls ``_save_checkpoint`` (the pointer and max_keep_ckpts)."""
    assert digest(CheckpointHook._save_checkpoint_with_step) == "cdbc1b54c7c88d95"
    assert "self._save_checkpoint_with_step(runner, step, meta=meta)" in inspect.getsource(
        CheckpointHook._save_checkpoint
    )


def test_the_runner_builds_loaders_with_its_module_worker_init_fn():
    """protect_workers replaces ``mmengine.runner.runner.default_worker_init_fn``."""
    source = inspect.getsource(runner_module.Runner.build_dataloader)
    assert "default_worker_init_fn" in source and hasattr(runner_module, "default_worker_init_fn")


def test_persistent_workers_live_in_the_loaders_iterator_attribute():
    """RandomStateHook's restart sets ``loader._iterator = None`` to start new workers."""
    loader = DataLoader(list(range(4)), num_workers=1, persistent_workers=True)
    first = iter(loader)
    assert loader._iterator is first and iter(loader) is first  # kept and reused
    loader._iterator = None
    assert iter(loader) is not first
