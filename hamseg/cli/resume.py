"""``tools/train.py --resume``: mmseg's flag with mmseg's meaning, and hamseg's safety where mmseg
has none (docs/usage.md, "--resume").

mmseg: ``--resume`` with ``load_from`` resumes from it, without one from the work dir's latest
checkpoint. hamseg reads ``load_from`` from the command line so; a config file's own
``load_from`` is a fine-tuning start: a bare ``--resume`` takes the work dir's latest COMPLETE
checkpoint, or starts a new run from those weights when there is none.
"""

from __future__ import annotations

import os
import os.path as osp
from typing import Any

import torch
from mmengine.config import Config
from mmengine.logging import print_log

from hamseg.apis.checkpoint import reinitialised_by_load_from
from hamseg.apis.demo import demo_command_for
from hamseg.engine.checkpoints import find_latest_complete_checkpoint

from .common import CLIError, notice
from .preflight import schedule_ends


def _load(path: str) -> dict:
    """A local checkpoint, memory-mapped; {} if unreadable (the Runner's load says why)."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:
        return {}
    return checkpoint if isinstance(checkpoint, dict) else {}


def apply_resume(cfg: Config, resume: Any, cfg_options: dict | None = None) -> str | None:
    """Set ``cfg.resume``/``cfg.load_from`` for ``--resume`` (truthy) as the module docstring
    says; a resumed config without ``randomness.seed`` takes the checkpoint's (mmengine seeds
    the sampler before it reads the checkpoint). The checkpoint resumed, or None."""
    cfg.resume = bool(resume)
    target = None
    if resume and cfg.get("load_from") and "load_from" in (cfg_options or {}):
        target = cfg.load_from  # mmseg's resume + load_from
    elif resume:
        target = find_latest_complete_checkpoint(cfg.work_dir)  # never a partial file
        cfg.resume = target is not None
        if target is not None:
            cfg.load_from = target
            notice(f"Resuming from the latest complete checkpoint {target}")
        else:
            start = f"from load_from={cfg.load_from}" if cfg.get("load_from") else "from scratch"
            notice(f"No checkpoint in {cfg.work_dir} yet: a new run {start}")
    load_from = cfg.get("load_from")
    local = bool(load_from) and "://" not in load_from
    where = "" if not local or osp.isabs(load_from) else f", relative to {os.getcwd()}"
    if local and not osp.isfile(load_from):
        demo = demo_command_for(load_from)  # the demo's checkpoint: say what writes it
        raise CLIError(
            f"load_from checkpoint not found: {load_from}{where} ("
            + (f"`{demo}` writes it, or " if demo else "")
            + "set another with --cfg-options load_from=PATH)"
        )
    if (
        where and target is None
    ):  # mmengine reads it against the working directory, not the config's folder
        notice(f"load_from={load_from}{where}: {osp.abspath(load_from)}")
    if target is not None and (cfg.get("randomness") or {}).get("seed") is None:
        seed = (_load(target).get("meta") or {}).get("seed")
        if seed is not None:
            cfg.randomness = dict(cfg.get("randomness") or {}, seed=int(seed))
    return target


def finished_run(cfg: Config, target: str | None) -> str | None:
    """One line if ``target`` is at or past ``max_iters`` (``max_epochs``), else None."""
    meta = (_load(target).get("meta") or {}) if target else {}
    for unit in ("iter", "epoch"):
        done, total = meta.get(unit), (cfg.get("train_cfg") or {}).get(f"max_{unit}s")
        if done is not None and total is not None and done >= total:
            return (
                f"{target} is at {unit} {done} of max_{unit}s={total}: the run is complete, "
                f"nothing to train (to train longer, start a new run from its weights: "
                f"--cfg-options load_from={target} max_iters=N, without --resume)"
            )
    return None


def check_resumed_schedule(cfg: Config, target: str | None) -> None:
    """Refuse to resume ``target`` with other scheduler ends than it was trained with: mmengine
    restores the schedulers from the checkpoint and the loop's length from the config, so a
    longer schedule would go on at the final lr."""
    checkpoint = _load(target) if target else {}
    trained_ends = [s["end"] for s in checkpoint.get("param_schedulers") or [] if "end" in s]
    max_iters, ends = schedule_ends(cfg)
    if not trained_ends or trained_ends == ends:
        return
    try:
        stored = Config.fromstring((checkpoint.get("meta") or {})["cfg"], ".py")
        trained = (stored.get("train_cfg") or {}).get("max_iters") or trained_ends[-1]
    except Exception:  # no config stored, or one that does not read back
        trained = trained_ends[-1]
    raise CLIError(
        f"--resume {target}: it was trained with schedulers ending at {trained_ends} "
        f"(max_iters={trained}), this config's end at {ends} (max_iters={max_iters}), and "
        f"resuming keeps the checkpoint's: resume it with --cfg-options max_iters={trained}, or "
        f"train longer from its weights in a new run (--cfg-options load_from={target} "
        f"max_iters={max_iters}, without --resume)"
    )


def report_load_from(runner: Any, cfg: Config) -> str | None:
    """Before a run from ``load_from`` weights, log which tensors keep their fresh init
    (fine-tuning with another class count); the line, or None."""
    load_from = cfg.get("load_from")
    if cfg.get("resume") or not load_from or "://" in load_from or not osp.isfile(load_from):
        return None
    line = reinitialised_by_load_from(runner.model, load_from)
    if line is not None:
        print_log(line, "current")
    return line
