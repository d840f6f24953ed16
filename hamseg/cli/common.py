"""What the tools share: the config with its overrides and launcher, ``--amp``, the guard hooks,
hamseg's notices, and :func:`run_cli`, where a user's error becomes one line and exit code 2."""

import logging
import os
import os.path as osp
import sys
from collections.abc import Callable

import torch
from mmengine.config import Config
from mmengine.dist import is_main_process
from mmengine.logging import print_log

from hamseg.compat.package_lookup import config_file
from hamseg.datasets.checks import ClassCountError, InvalidSampleError
from hamseg.engine import TrainingStopped, setup_cpu_distributed
from hamseg.engine.preemption import ignore_signals_until_exit
from hamseg.engine.stop import leave_process_group, report_exit, watch_launcher
from hamseg.utils.errors import CorruptCheckpointError, UnsafeCheckpointError, UsageError, one_line

LAUNCHERS = ("none", "pytorch", "slurm", "mpi")
_OMPI = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")
_STARTERS = {"mpi": "mpirun -x MASTER_ADDR=HOST", "slurm": "srun (tools/slurm_train.sh)"}
_SLURM = ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_NODELIST")
NOTICES: list[str] = []  # this run's, repeated by log_notices after mmengine's config dump


class CLIError(UsageError):
    """A bad command line: printed as one line, exit code 2, no traceback."""


def notice(message: str, level: int = logging.INFO) -> str:
    """Log one of hamseg's one-line notices now, and again in :func:`log_notices`."""
    print_log(message, "current", level)
    NOTICES.append(message)
    return message


def log_notices() -> None:
    """hamseg's notices so far as one block (called after the Runner's config dump)."""
    if NOTICES:
        lines = "".join(f"\n    hamseg: {line}" for line in NOTICES)
        print_log(f"hamseg's notices of this run, again after the config:{lines}", "current")
        NOTICES.clear()


def build_config(
    config: str,
    cfg_options: dict | None = None,
    work_dir: str | None = None,
    launcher: str = "none",
    local_rank: int = 0,
) -> Config:
    """A config as mmseg's tools load it (also ``PACKAGE::`` names) with ``--cfg-options``
    (:mod:`.options`), the launcher's environment checked and a CPU group set up."""
    from .options import merge_cfg_options

    path = config_file(config)
    cfg = Config.fromfile(path)
    if cfg_options:
        merge_cfg_options(cfg, cfg_options)
    cfg.launcher = launcher
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get("work_dir") is None:
        cfg.work_dir = osp.join("./work_dirs", osp.splitext(osp.basename(path))[0])
    names = {"mpi": (*_OMPI, "MASTER_ADDR"), "slurm": _SLURM}.get(launcher, ())
    if missing := [name for name in names if name not in os.environ]:
        how = f"start with {_STARTERS[launcher]}"
        raise CLIError(f"--launcher {launcher}: {', '.join(missing)} not set; {how}")
    if launcher == "mpi":  # torch's rendezvous variables from OpenMPI's
        for name, value in zip(("RANK", "WORLD_SIZE", "LOCAL_RANK"), _OMPI):
            os.environ.setdefault(name, os.environ[value])
        os.environ.setdefault("MASTER_PORT", "29500")
    os.environ.setdefault("LOCAL_RANK", str(local_rank))  # mmseg's rule for --local-rank
    if launcher == "pytorch":
        watch_launcher()
    setup_cpu_distributed(cfg, launcher)
    return cfg


def add_guard_hooks(cfg: Config) -> list[str]:
    """Add the guards a training config lacks, an atomic ``CheckpointHook`` (options kept) and a
    train loader that resumes at the sampler; the type names added or swapped in."""
    hooks = list(cfg.get("custom_hooks") or [])
    kinds = [h.get("type") if isinstance(h, dict) else h for h in hooks]
    have = [k if isinstance(k, str) else getattr(k, "__name__", type(k).__name__) for k in kinds]
    guards = ("PreemptionHook", "NonFiniteLossHook", "RandomStateHook")
    added = [f"mmseg.{g}" for g in guards if not any(name.endswith(g) for name in have)]
    cfg.custom_hooks = hooks + [dict(type=name) for name in added]
    checkpoint = (cfg.get("default_hooks") or {}).get("checkpoint") or {}
    if str(checkpoint.get("type")).split(".")[-1] == "CheckpointHook":
        checkpoint["type"] = "mmseg.AtomicCheckpointHook"
        added.append(checkpoint["type"])
    loader = cfg.get("train_dataloader") or {}
    sampler = loader.get("sampler") or {}
    if str(sampler.get("type")).split(".")[-1] == "InfiniteSampler":
        sampler["type"] = "mmseg.ResumableInfiniteSampler"  # same indices, from any position
        added.append(sampler["type"])
        collate = loader.get("collate_fn", dict(type="pseudo_collate"))
        if isinstance(collate, dict):  # batches tagged with their worker's RNG state
            loader["collate_fn"] = dict(type="collate_with_worker_rng", collate=collate)
            added.append("collate_with_worker_rng")
    return added


def enable_amp(cfg: Config, dtype: str | None = None) -> None:
    """mmseg's ``--amp``: fp16 ``AmpOptimWrapper`` with dynamic loss scaling on a GPU, bfloat16
    ``CPUAmpOptimWrapper`` without one; ``dtype='bfloat16'`` on a GPU: no loss scaler."""
    kind, cuda = cfg.optim_wrapper.get("type", "OptimWrapper"), torch.cuda.is_available()
    if kind in ("AmpOptimWrapper", "CPUAmpOptimWrapper"):
        print_log("AMP training is already enabled in your config.", "current", logging.WARNING)
        return
    if kind != "OptimWrapper":
        raise CLIError(f"--amp needs optim_wrapper type OptimWrapper, got {kind}")
    dtype = dtype or ("float16" if cuda else "bfloat16")
    scale = "dynamic" if dtype == "float16" else dict(enabled=False)
    kind = "AmpOptimWrapper" if cuda else "CPUAmpOptimWrapper"
    cfg.optim_wrapper.update(type=kind, dtype=dtype, loss_scale=scale)


def run_cli(main: Callable[[], None]) -> None:
    """Run ``main``: a user's error (also from a DataLoader worker) is one line on stderr and
    exit 2; a run stopped on purpose (:class:`TrainingStopped`) one line from the main rank and
    its exit code (agreed between the ranks under a launch script); an aborting Ctrl-C one line
    and 130. A distributed run leaves its process group first."""
    user_errors = (UsageError, FileNotFoundError, InvalidSampleError, ClassCountError)
    user_errors += (UnsafeCheckpointError, CorruptCheckpointError)
    exit_code = None
    try:
        main()
    except TrainingStopped as stop:
        ignore_signals_until_exit()  # a signal during the seconds of exit keeps the exit code
        if is_main_process():
            print(f"{stop.label}{one_line(stop)}", file=sys.stderr)
        exit_code = stop.exit_code
    except user_errors as err:
        code = report_exit(2)  # 0: every rank under a launch script failed alike, it says 2
        if code or os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")) == "0":
            print(f"error: {one_line(err)}", file=sys.stderr)
        sys.exit(code)
    except KeyboardInterrupt:  # the PreemptionHook's second Ctrl-C, or one before training
        print("interrupted: stopped at once, no checkpoint of this iteration", file=sys.stderr)
        sys.exit(130)
    leave_process_group()  # outside the except block nothing holds the run's frames any more
    if exit_code is not None:
        sys.exit(report_exit(exit_code))
