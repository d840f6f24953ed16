"""What ``tools/train.py --resume`` means, so that every start of a requeued job can pass it.

mmengine resumes from a config's ``load_from`` (a bare ``--resume`` "resumed" the pretrained
weights). Here ``--resume PATH`` resumes from PATH, a bare one from the work dir's latest complete
checkpoint or starts a new run. docs/robustness.md, "What --resume means".
"""

from __future__ import annotations

import os
import os.path as osp
from typing import Any, Optional

import torch
from mmengine.config import Config
from mmengine.logging import print_log

from hamseg.apis.checkpoint import reinitialised_by_load_from
from hamseg.apis.demo import demo_command_for
from hamseg.engine.checkpoints import find_latest_complete_checkpoint
from hamseg.utils.errors import require_file

from .common import CLIError

__all__ = ["apply_resume", "finished_run", "report_load_from"]


def _checkpoint_meta(path: str) -> dict:
    """``meta`` of a local checkpoint (memory-mapped: the tensors are not read)."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # the Runner's own load reports an unreadable file clearly
        return {}
    return checkpoint.get("meta") or {} if isinstance(checkpoint, dict) else {}


def finished_run(cfg: Config, target: Optional[str]) -> Optional[str]:
    """One line if ``target`` is at or past ``max_iters`` (``max_epochs``), else None."""
    train, meta = cfg.get("train_cfg") or {}, _checkpoint_meta(target) if target else {}
    for unit in ("iter", "epoch"):
        done, total = meta.get(unit), train.get(f"max_{unit}s")
        if done is not None and total is not None and done >= total:
            done = f"{target} is at {unit} {done} of max_{unit}s={total}: the run is complete"
            return f"{done}, nothing to train (to go on: --cfg-options max_iters=N)"
    return None


def apply_resume(cfg: Config, resume: Optional[str]) -> Optional[str]:
    """Set ``cfg.resume``/``cfg.load_from`` for ``--resume`` (see the module docstring). When
    resuming, a config without ``randomness.seed`` takes the checkpoint's: mmengine seeds the
    ``InfiniteSampler`` before it reads the checkpoint, and the batch order depends on it.

    Args:
        cfg: The training config, with ``work_dir`` set (changed in place).
        resume: None (no ``--resume``), 'auto' (bare ``--resume``) or a checkpoint path.

    Returns:
        The checkpoint training resumes from, or None for a new run.

    Raises:
        FileNotFoundError: The ``--resume`` path is missing. CLIError: so is ``load_from``.
    """
    target: Optional[str] = None
    if resume == "auto" or (resume is None and cfg.get("resume") and not cfg.get("load_from")):
        target = find_latest_complete_checkpoint(cfg.work_dir)  # never a partial file
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
    local = target is None and load_from and "://" not in load_from
    where = "" if not local or osp.isabs(load_from) else f", relative to {os.getcwd()}"
    if local and not osp.isfile(load_from):
        demo = demo_command_for(load_from)  # the demo's checkpoint: say what makes it
        raise CLIError(
            f"load_from checkpoint not found: {load_from}{where} ("
            + (f"`{demo}` writes it, or " if demo else "")
            + "set another with --cfg-options load_from=PATH)"
        )
    if where:  # mmengine reads it against the working directory, not the config's folder
        print_log(f"load_from={load_from}{where}: {osp.abspath(load_from)}", "current")
    if target is not None and (cfg.get("randomness") or {}).get("seed") is None:
        seed = _checkpoint_meta(target).get("seed")
        if seed is not None:
            cfg.randomness = dict(cfg.get("randomness") or {}, seed=int(seed))
    return target


def report_load_from(runner: Any, cfg: Config) -> Optional[str]:
    """Before a run from ``load_from`` weights, log in one line which tensors keep their fresh
    init (fine-tuning with another class count); the line, or None (resuming, a URL, all fit)."""
    load_from = cfg.get("load_from")
    if cfg.get("resume") or not load_from or "://" in load_from or not osp.isfile(load_from):
        return None
    line = reinitialised_by_load_from(runner.model, load_from)
    if line is not None:
        print_log(line, "current")
    return line
