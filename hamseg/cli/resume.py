"""``tools/train.py --resume``: mmseg's flag with mmseg's meaning, and hamseg's safety where mmseg
has none (docs/usage.md, "--resume"). As in mmseg, ``--resume`` with ``load_from`` from the
command line resumes it, without one the work dir's latest checkpoint; a config file's own
``load_from`` is a fine-tuning start: a bare ``--resume`` takes the work dir's latest COMPLETE
checkpoint, or starts a new run from those weights when there is none."""

import logging
import os
import os.path as osp
import re
from typing import Any

import torch
from mmengine.config import Config

from hamseg.engine.checkpoints import find_latest_complete_checkpoint

from .common import CLIError, notice
from .preflight import schedule_ends


def _load(path: str | None) -> dict:
    """A local checkpoint, memory-mapped; {} if none or unreadable (the Runner's load says why)."""
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
    if load_from and "://" not in load_from and not osp.isfile(load_from):
        where = "" if osp.isabs(load_from) else f", relative to {os.getcwd()}"
        demo = re.match(r"work_dirs/demo/([\w.-]+)/iter_\d+\.pth$", load_from)  # the templates'
        demo = (
            f"`python tools/run_demo.py --config configs/demo/{demo[1]}.py` writes it, or "
            if demo
            else ""
        )
        raise CLIError(
            f"load_from checkpoint not found: {load_from}{where} ({demo}set "
            "another with --cfg-options load_from=PATH)"
        )
    if target is not None and (cfg.get("randomness") or {}).get("seed") is None:
        seed = (_load(target).get("meta") or {}).get("seed")
        if seed is not None:
            cfg.randomness = dict(cfg.get("randomness") or {}, seed=int(seed))
    return target


def finished_run(cfg: Config, target: str | None) -> str | None:
    """One line if ``target`` is at or past ``max_iters`` (``max_epochs``), else None."""
    meta = _load(target).get("meta") or {}
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
    """Resuming ``target`` with other scheduler ends than it was trained with: mmengine restores
    the checkpoint's schedulers (as mmseg does) and the loop's length from the config; one
    warning line says so and how to train longer instead."""
    trained = [s["end"] for s in _load(target).get("param_schedulers") or [] if "end" in s]
    max_iters, ends = schedule_ends(cfg)
    if trained and trained != ends:
        notice(
            f"--resume {target}: its schedulers end at {trained}, this config's at {ends} "
            f"(max_iters={max_iters}); resumed with the checkpoint's (mmengine). To train longer "
            f"on this config's schedule, start a new run: --cfg-options load_from={target}",
            logging.WARNING,
        )
