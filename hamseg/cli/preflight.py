"""What tools/train.py and tools/test.py check before the first iteration: every sample of the
splits the run reads (tools/validate_dataset.py's scan) and whether the schedule ends at max_iters.
docs/robustness.md, "Before the first iteration"."""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import sys
import time
from collections.abc import Iterator, Sequence

from mmengine.config import Config
from mmengine.logging import print_log

from hamseg.datasets.checks import data_cfg_options, sample_error, validate_splits
from hamseg.datasets.loading import InvalidSampleError
from hamseg.utils.config import defined_splits

from .common import CLIError, cfg_options_argv


def validate_command(config: str, argv: Sequence[str] | None = None) -> str:
    """The command that lists every bad sample of what this run reads: tools/validate_dataset.py
    on ``config`` with the ``--cfg-options`` of ``argv`` (default: this command line)."""
    options = data_cfg_options(cfg_options_argv(sys.argv[1:] if argv is None else argv))
    return shlex.join(["python", "tools/validate_dataset.py", config, *options])


def scan_data(cfg: Config, splits: Sequence[str], config: str) -> None:
    """Scan every sample of the ``splits``; print each problem, then raise in one line."""
    workers = 1 if cfg.launcher != "none" else min(4, os.cpu_count() or 1)
    start = time.perf_counter()
    reports = validate_splits(cfg, [s for s in defined_splits(cfg) if s in splits], workers, False)
    problems = [problem for report in reports for problem in report.problems]
    took = f"{time.perf_counter() - start:.1f} s, {workers} process(es); --skip-data-check"
    print_log(f"data scan: {'; '.join(r.summary() for r in reports)} ({took})", "current")
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


def check_schedule(
    cfg: Config, cfg_options: dict | None = None, allow_mismatch: bool = False
) -> str | None:
    """A last ``by_epoch=False`` scheduler that ends before or after ``train_cfg.max_iters``:
    refused (:class:`CLIError`) if ``--cfg-options`` set a scheduler's ends half-way (unless
    ``allow_mismatch``), else one warning line, returned and logged (a config as written, or
    ``train_cfg.max_iters=N`` alone: trained as mmseg trains it); None if the ends agree."""
    max_iters, ends = schedule_ends(cfg)
    if max_iters is None or not ends or ends[-1] == max_iters:
        return None
    options = cfg_options or {}
    touched = sorted(k for k in options if k.startswith("param_scheduler"))
    if touched and not allow_mismatch:
        raise CLIError(
            f"--cfg-options {' '.join(touched)} leaves the last param_scheduler ending at "
            f"iteration {ends[-1]} but train_cfg.max_iters={max_iters}: set the length with "
            "--cfg-options max_iters=N (moves train_cfg, the schedulers' ends and the "
            "val/checkpoint intervals that used it), or pass --allow-schedule-mismatch"
        )
    line = f"the last param_scheduler ends at iteration {ends[-1]}, train_cfg.max_iters={max_iters}"
    if "train_cfg.max_iters" in options:
        line = (
            f"--cfg-options train_cfg.max_iters={max_iters}: {line}, trained as mmseg trains it "
            f"(--cfg-options max_iters={max_iters} would move the schedulers' ends too)"
        )
    else:
        line += " as the config is written: trained as mmseg trains it"
    print_log(line, "current", logging.WARNING)
    return line
