"""What ``tools/train.py --resume`` means, so that a requeued job can always pass it.

mmengine resumes from ``load_from`` whenever a config sets it: a bare ``--resume`` with a
fine-tuning config (every ``configs/custom/`` template, ``configs/ham_voc_trainval.py``)
"resumed" the pretrained checkpoint, e.g. its iteration 60, trained nothing and exited 0.
:func:`apply_resume` gives ``--resume`` one meaning whatever the config says:

* ``--resume PATH``: resume from that checkpoint (iteration, optimizer, schedule, ...).
* bare ``--resume``: resume from the latest complete checkpoint of the work dir
  (:func:`~hamseg.engine.checkpoints.find_latest_complete_checkpoint`); when there is
  none, start a new run, from ``load_from``'s weights if the config sets it (weights only).
* no ``--resume``: the config's own ``resume``/``load_from``.

Whenever a run starts from ``load_from`` weights, a missing local file is a one-line error
naming it and the override. When resuming, a config without ``randomness.seed`` takes the seed
of the checkpoint: mmengine builds the ``InfiniteSampler`` before it reads the checkpoint, so
without it the resumed run would draw its batches in another order than the original run.
"""

from __future__ import annotations

import os.path as osp
from typing import Any, Optional

import torch
from mmengine.config import Config
from mmengine.logging import print_log

from hamseg.engine.checkpoints import find_latest_complete_checkpoint
from hamseg.utils.errors import require_file

from . import CLIError

__all__ = ["apply_resume", "report_load_from"]


def _checkpoint_seed(path: str) -> Optional[int]:
    """``meta.seed`` of a local checkpoint (memory-mapped: the tensors are not read)."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # the Runner's own load reports an unreadable file clearly
        return None
    seed = checkpoint.get("meta", {}).get("seed") if isinstance(checkpoint, dict) else None
    return int(seed) if seed is not None else None


def apply_resume(cfg: Config, resume: Optional[str]) -> Optional[str]:
    """Set ``cfg.resume``/``cfg.load_from`` for ``--resume`` (see the module docstring).

    Args:
        cfg: The training config, with ``work_dir`` set (changed in place).
        resume: None (no ``--resume``), 'auto' (bare ``--resume``) or a checkpoint path.

    Returns:
        The checkpoint training resumes from, or None for a new run.

    Raises:
        CLIError: The ``--resume`` path, or the ``load_from`` of a new run, is missing.
    """
    target: Optional[str] = None
    if resume == "auto":
        target = find_latest_complete_checkpoint(cfg.work_dir)
        cfg.resume = target is not None
        if target is not None:  # given as the path: mmengine's own lookup trusts the pointer
            cfg.load_from = target
            print_log(f"Resuming from the latest complete checkpoint {target}", "current")
        else:
            start = f"from load_from={cfg.load_from}" if cfg.get("load_from") else "from scratch"
            print_log(f"No checkpoint in {cfg.work_dir} yet: a new run {start}", "current")
    elif resume is not None:
        target = cfg.load_from = require_file(resume, "checkpoint to resume from")
        cfg.resume = True
    elif cfg.get("resume") and cfg.get("load_from"):
        target = cfg.load_from
    load_from = cfg.get("load_from")
    if target is None and load_from and "://" not in load_from and not osp.isfile(load_from):
        raise CLIError(
            f"load_from checkpoint not found: {load_from} "
            "(set another with --cfg-options load_from=PATH)"
        )
    if target is not None and (cfg.get("randomness") or {}).get("seed") is None:
        seed = _checkpoint_seed(target)
        if seed is not None:
            cfg.randomness = dict(cfg.get("randomness") or {}, seed=seed)
    return target


def report_load_from(runner: Any, cfg: Config) -> Optional[str]:
    """Before a run that starts from ``load_from`` weights: say in one line which tensors keep
    their fresh init (fine-tuning with another class count re-initialises the classifier).
    mmengine's own size-mismatch report follows when the weights are loaded (it prints it).

    Returns:
        The line logged, or None (resuming, no ``load_from``, a URL, or everything fits).
    """
    from hamseg.apis.checkpoint import reinitialised_by_load_from

    load_from = cfg.get("load_from")
    if cfg.get("resume") or not load_from or "://" in load_from or not osp.isfile(load_from):
        return None
    line = reinitialised_by_load_from(runner.model, load_from)
    if line is not None:
        print_log(line, "current")
    return line
