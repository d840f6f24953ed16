"""What tools/train.py and tools/test.py check before the first iteration: every sample of the
splits the run reads, the schedule's end, the total batch the recipe is for."""

import contextlib
import logging
import os
import os.path as osp
import shlex
import sys
import time
from collections.abc import Iterator, Sequence

from mmengine.config import Config

from hamseg.datasets.checks import InvalidSampleError, sample_error, validate_splits
from hamseg.utils.config import defined_splits

from .common import CLIError, notice


def validate_command(config: str, argv: Sequence[str] | None = None) -> str:
    """tools/validate_dataset.py on ``config`` with every ``--cfg-options`` of ``argv`` (default:
    this command line): the command that lists every bad sample of what this run reads."""
    found, inside = [], False
    for arg in sys.argv[1:] if argv is None else argv:
        if arg == "--cfg-options" or arg.startswith("--cfg-options="):
            inside = arg == "--cfg-options"
            found += [] if inside else [arg.partition("=")[2]]
        elif arg.startswith("-"):
            inside = False
        elif inside:
            found.append(arg)
    options = ["--cfg-options", *found] if found else []
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
        command = validate_command(config)
        raise InvalidSampleError(f"{line}; list every bad file at once: {command}") from None


def schedule_ends(cfg: Config) -> tuple[int | None, list[int]]:
    """``train_cfg.max_iters`` and the ends of the ``by_epoch=False`` schedulers, in order."""
    schedulers = cfg.get("param_scheduler") or []
    schedulers = [schedulers] if isinstance(schedulers, dict) else schedulers
    ends = [s["end"] for s in schedulers if s.get("by_epoch") is False and "end" in s]
    return (cfg.get("train_cfg") or {}).get("max_iters"), ends


def check_schedule(cfg: Config) -> str | None:
    """A warning line if the last scheduler ends off ``train_cfg.max_iters`` (mmseg trains it)."""
    max_iters, ends = schedule_ends(cfg)
    if max_iters is None or not ends or ends[-1] == max_iters:
        return None
    line = f"the last param_scheduler ends at iteration {ends[-1]}, train_cfg.max_iters={max_iters}"
    return notice(f"{line}: trained as written (max_iters=N moves both)", logging.WARNING)


def launch_world_size(launcher: str) -> int:
    """The number of training processes, as the launcher's environment says."""
    if launcher == "none":
        return 1
    return int(os.environ.get("SLURM_NTASKS" if launcher == "slurm" else "WORLD_SIZE", 1))


def check_total_batch(cfg: Config, world_size: int, scale: bool = False) -> None:
    """Refuse in one line a total batch other than the recipe's ``auto_scale_lr.base_batch_size``
    unless ``scale`` (``--auto-scale-lr``) or the config enables mmengine's lr x total / base."""
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
        return
    raise CLIError(
        f"{what}, but the recipe is for {base}: use a total batch of {base}, or --auto-scale-lr "
        f"(lr x {total}/{base}), or --cfg-options auto_scale_lr.base_batch_size={total} (the "
        "recipe's lr at this batch)"
    )
