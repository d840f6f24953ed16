"""What tools/train.py and tools/test.py check before the first iteration: every sample of the
splits the run reads, a schedule that ends at ``max_iters``, the total batch the recipe is for."""

from __future__ import annotations

import contextlib
import logging
import os
import os.path as osp
import shlex
import sys
import time
from collections.abc import Iterator, Sequence

from mmengine.config import Config
from mmengine.dist import get_world_size, is_distributed

from hamseg.datasets.checks import sample_error, validate_splits
from hamseg.datasets.loading import InvalidSampleError
from hamseg.utils.config import defined_splits

from .common import CLIError, notice


def cfg_options_argv(argv: Sequence[str]) -> list[str]:
    """The ``--cfg-options`` part of a command line (every occurrence, as one), or []."""
    found: list[str] = []
    inside = False
    for arg in argv:
        if arg == "--cfg-options" or arg.startswith("--cfg-options="):
            inside = arg == "--cfg-options"
            found += [] if inside else [arg.partition("=")[2]]
        elif arg.startswith("-"):
            inside = False
        elif inside:
            found.append(arg)
    return ["--cfg-options", *found] if found else []


def validate_command(config: str, argv: Sequence[str] | None = None) -> str:
    """tools/validate_dataset.py on ``config`` with the ``--cfg-options`` of ``argv`` (default:
    this command line): the command that lists every bad sample of what this run reads."""
    options = cfg_options_argv(sys.argv[1:] if argv is None else argv)
    return shlex.join(["python", "tools/validate_dataset.py", config, *options])


def scan_data(cfg: Config, splits: Sequence[str], config: str) -> None:
    """Scan every sample of the ``splits``; print each problem, then raise in one line."""
    workers = 1 if cfg.launcher != "none" else min(4, os.cpu_count() or 1)
    start = time.perf_counter()
    reports = validate_splits(cfg, [s for s in defined_splits(cfg) if s in splits], workers, False)
    problems = [problem for report in reports for problem in report.problems]
    took = f"{time.perf_counter() - start:.1f} s, {workers} process(es); --skip-data-check"
    notice(f"data scan: {'; '.join(r.summary() for r in reports)} ({took})")
    if problems:
        print(*problems, sep="\n", file=sys.stderr)
        raise InvalidSampleError(
            f"{len(problems)} bad sample(s) before the first iteration, listed above (first: "
            f"{problems[0]}); fix them and check again with `{validate_command(config)}`"
        )


@contextlib.contextmanager
def naming_validate_dataset(config: str) -> Iterator[None]:
    """A bad sample met while running also names the command that lists every bad file."""
    try:
        yield
    except Exception as err:
        if (line := sample_error(err)) is None:
            raise
        raise InvalidSampleError(
            f"{line}; list every bad file at once: {validate_command(config)}"
        ) from None


def schedule_ends(cfg: Config) -> tuple[int | None, list[int]]:
    """``train_cfg.max_iters`` and the ends of the ``by_epoch=False`` schedulers, in order."""
    schedulers = cfg.get("param_scheduler") or []
    schedulers = [schedulers] if isinstance(schedulers, dict) else schedulers
    ends = [s["end"] for s in schedulers if s.get("by_epoch") is False and "end" in s]
    return (cfg.get("train_cfg") or {}).get("max_iters"), ends


def check_schedule(cfg: Config, options: dict | None = None, allow: bool = False) -> str | None:
    """A last ``by_epoch=False`` scheduler that ends off ``train_cfg.max_iters``: refused if
    ``--cfg-options`` set a scheduler's end half-way (unless ``allow``), else trained as mmseg
    trains it, with one warning line (returned)."""
    max_iters, ends = schedule_ends(cfg)
    if max_iters is None or not ends or ends[-1] == max_iters:
        return None
    touched = sorted(k for k in options or {} if k.startswith("param_scheduler"))
    line = f"the last param_scheduler ends at iteration {ends[-1]}, train_cfg.max_iters={max_iters}"
    if touched and not allow:
        raise CLIError(
            f"--cfg-options {' '.join(touched)}: {line}; set the length with --cfg-options "
            "max_iters=N (moves the loop, the schedulers' ends and the intervals that used it), "
            "or pass --allow-schedule-mismatch"
        )
    if "train_cfg.max_iters" in (options or {}):
        line = f"--cfg-options train_cfg.max_iters={max_iters}: {line} (max_iters=N moves both)"
    return notice(f"{line}: trained as mmseg trains it", logging.WARNING)


def launch_world_size(launcher: str) -> int:
    """The number of training processes: the group's size, else the launcher's environment."""
    if is_distributed():
        return get_world_size()
    if launcher == "none":
        return 1
    return int(os.environ.get("SLURM_NTASKS" if launcher == "slurm" else "WORLD_SIZE", 1))


def check_total_batch(cfg: Config, world_size: int, accept: bool = False, scale: bool = False):
    """Refuse (one line) a total batch (``world_size`` x ``train_dataloader.batch_size``) other
    than the recipe's ``auto_scale_lr.base_batch_size`` unless ``accept`` (the recipe's lr) or
    ``scale`` (mmengine's lr x total / base); configs without a base batch are not checked."""
    auto = dict(cfg.get("auto_scale_lr") or {})
    base = auto.get("base_batch_size")
    if scale and base is None:
        raise CLIError(
            "--auto-scale-lr: the config has no auto_scale_lr.base_batch_size (the total batch "
            "its lr is for); set it with --cfg-options auto_scale_lr.base_batch_size=N"
        )
    if scale:
        cfg.auto_scale_lr = dict(auto, enable=True)
    per_gpu = cfg.train_dataloader.batch_size
    total = world_size * per_gpu
    if base is None or total == base:
        return
    what = f"{osp.basename(cfg.filename or 'the config')}: total batch {world_size} process(es)"
    what += f" x {per_gpu} = {total}"
    if scale or auto.get("enable", False):
        notice(f"{what}, recipe {base}: lr scaled by {total}/{base} (auto_scale_lr)")
    elif accept:
        notice(f"{what}, recipe {base}: trained with the recipe's lr (--allow-batch-mismatch)")
    else:
        fixes = [f"{base // per_gpu} GPUs"] if base % per_gpu == 0 else []
        if base % world_size == 0:
            fixes.append(f"--cfg-options train_dataloader.batch_size={base // world_size}")
        fixes += [
            f"--auto-scale-lr (lr x {total}/{base})",
            "--allow-batch-mismatch (the recipe's lr)",
        ]
        raise CLIError(f"{what}, but the recipe is for {base}: use " + ", or ".join(fixes))
