"""What tools/train.py and tools/test.py check before the first iteration: every sample of the
splits the run reads (tools/validate_dataset.py's scan) and a schedule that ends at max_iters.
docs/robustness.md, "Before the first iteration"."""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import time
from collections.abc import Iterator, Sequence

from mmengine.config import Config
from mmengine.logging import print_log

from hamseg.datasets.checks import validate_splits
from hamseg.datasets.loading import InvalidSampleError
from hamseg.utils.config import defined_splits

from .common import CLIError, cfg_options_argv, user_message


def validate_command(config: str, argv: Sequence[str] | None = None) -> str:
    """The command that lists every bad sample of what this run reads: tools/validate_dataset.py
    on ``config`` with the ``--cfg-options`` of ``argv`` (default: this command line)."""
    options = cfg_options_argv(sys.argv[1:] if argv is None else argv)
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
    except InvalidSampleError as err:
        raise InvalidSampleError(
            f"{user_message(err)}; list every bad file at once: {validate_command(config)}"
        ) from None


def check_schedule(cfg: Config, allow_mismatch: bool = False) -> None:
    """Refuse (:class:`CLIError`) an iteration-based config whose last ``by_epoch=False``
    scheduler ends before or after ``train_cfg.max_iters``, unless ``allow_mismatch``."""
    max_iters = (cfg.get("train_cfg") or {}).get("max_iters")
    schedulers = cfg.get("param_scheduler") or []
    schedulers = [schedulers] if isinstance(schedulers, dict) else schedulers
    ends = [s["end"] for s in schedulers if s.get("by_epoch") is False and "end" in s]
    if max_iters is None or not ends or ends[-1] == max_iters or allow_mismatch:
        return
    raise CLIError(
        f"the last param_scheduler ends at iteration {ends[-1]} but train_cfg.max_iters="
        f"{max_iters}: set both with --cfg-options max_iters={max_iters} (moves train_cfg, the "
        "schedulers' ends and the val/checkpoint intervals that used it), or pass "
        "--allow-schedule-mismatch"
    )
