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
from .preflight import schedule_ends

__all__ = ["apply_resume", "check_resumed_schedule", "finished_run", "report_load_from"]


def _load(path: str) -> dict:
    """A local checkpoint, memory-mapped (the tensors are not read); {} if unreadable (the
    Runner's own load reports that clearly)."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:
        return {}
    return checkpoint if isinstance(checkpoint, dict) else {}


def _checkpoint_meta(path: str) -> dict:
    """``meta`` of a local checkpoint."""
    return _load(path).get("meta") or {}


def _trained_schedule(checkpoint: dict) -> tuple[int | None, list[int]]:
    """The ``max_iters`` (from the config stored in ``meta``) and scheduler ends (from their
    saved states) a checkpoint was trained with; None/[] where it does not say."""
    ends = [state["end"] for state in checkpoint.get("param_schedulers") or [] if "end" in state]
    try:
        stored = Config.fromstring((checkpoint.get("meta") or {})["cfg"], ".py")
        max_iters = (stored.get("train_cfg") or {}).get("max_iters")
    except Exception:  # no config stored, or one that does not read back
        max_iters = None
    return max_iters, ends


def check_resumed_schedule(cfg: Config, target: Optional[str], extend: bool = False) -> None:
    """Refuse (:class:`CLIError`) to resume ``target`` with other scheduler ends than it was
    trained with: mmengine restores the schedulers (their ends too) from the checkpoint and the
    loop's length from the config, so a longer schedule would go on at the final learning
    rate. (Another ``train_cfg.max_iters`` alone, the loop's end, is resumed as mmseg does.)
    ``extend``: resume with the config's schedulers, rebuilt at the checkpoint's iteration
    (:class:`~hamseg.engine.ExtendScheduleHook`, added to ``cfg``)."""
    if target is None or not (checkpoint := _load(target)):
        return
    trained, trained_ends = _trained_schedule(checkpoint)
    max_iters, ends = schedule_ends(cfg)
    if not trained_ends or trained_ends == ends:
        return
    trained = trained or trained_ends[-1]
    if extend:
        cfg.custom_hooks = [*(cfg.get("custom_hooks") or []), dict(type="mmseg.ExtendScheduleHook")]
        return
    raise CLIError(
        f"--resume {target}: it was trained with schedulers ending at {trained_ends} "
        f"(max_iters={trained}), this config's end at {ends} (max_iters={max_iters}), and "
        f"resuming keeps the checkpoint's: resume it with --cfg-options max_iters={trained}, or "
        f"train longer from its weights in a new run (--cfg-options load_from={target} "
        f"max_iters={max_iters}, without --resume; or --extend-schedule: this config's "
        "schedulers, rebuilt at the checkpoint's iteration)"
    )


def finished_run(cfg: Config, target: Optional[str]) -> Optional[str]:
    """One line if ``target`` is at or past ``max_iters`` (``max_epochs``), else None."""
    train = cfg.get("train_cfg") or {}
    meta = _checkpoint_meta(target) if target else {}
    for unit in ("iter", "epoch"):
        done = meta.get(unit)
        total = train.get(f"max_{unit}s")
        if done is not None and total is not None and done >= total:
            done = f"{target} is at {unit} {done} of max_{unit}s={total}: the run is complete"
            return (
                f"{done}, nothing to train (to train longer, start a new run from its weights: "
                f"--cfg-options load_from={target} max_iters=N, without --resume)"
            )
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
