"""What the tools share: the config with its overrides and launcher, ``--amp``, the guard hooks,
hamseg's notices, and :func:`run_cli`, where a user's error becomes one line and exit code 2."""

from __future__ import annotations

import logging
import os
import os.path as osp
import sys
from collections.abc import Callable
from typing import Any

import torch
from mmengine.config import Config
from mmengine.dataset import InfiniteSampler
from mmengine.dist import is_main_process
from mmengine.hooks import CheckpointHook
from mmengine.logging import print_log
from mmseg.registry import HOOKS

from hamseg.compat.package_lookup import config_file
from hamseg.datasets.checks import ClassCountError
from hamseg.datasets.loading import InvalidSampleError
from hamseg.engine import TrainingStopped, setup_cpu_distributed
from hamseg.engine.preemption import ignore_signals_until_exit
from hamseg.engine.stop import leave_process_group, report_exit, watch_launcher
from hamseg.utils.errors import CorruptCheckpointError, UnsafeCheckpointError, UsageError
from hamseg.utils.messages import one_line

#: ``--launcher`` choices, as in mmseg's tools.
LAUNCHERS = ("none", "pytorch", "slurm", "mpi")
#: The guards tools/train.py adds to every training config (hamseg.engine), in this order.
GUARD_HOOKS = ("PreemptionHook", "NonFiniteLossHook", "RandomStateHook")
_OMPI = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")
#: Per launcher: the variables its starter sets, and how to start the processes (TOOL: the script).
_LAUNCH = {
    "mpi": (
        (*_OMPI, "MASTER_ADDR"),
        "Start the processes with OpenMPI's mpirun (install OpenMPI, e.g. apt install "
        "openmpi-bin): mpirun -np N -x MASTER_ADDR=HOST [-x MASTER_PORT=PORT] python TOOL CONFIG "
        "--launcher mpi",
    ),
    "slurm": (
        ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_NODELIST"),
        "Start the processes with slurm's srun: srun -p PARTITION -n N python -u TOOL CONFIG "
        "--launcher slurm (or tools/slurm_train.sh, tools/slurm_test.sh)",
    ),
}
#: hamseg's notices of this run, repeated by :func:`log_notices` after mmengine's config dump.
NOTICES: list[str] = []


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
    """Load a config as mmseg's tools do (also ``hamseg::``/``mmseg::`` names), merge
    ``--cfg-options`` (:func:`hamseg.cli.options.merge_cfg_options`), set ``work_dir`` (default
    ``./work_dirs/<config name>``), check the launcher's environment and set up a CPU group."""
    from .options import merge_cfg_options

    path = config_file(config)
    cfg = Config.fromfile(path)
    cfg.launcher = launcher
    if cfg_options:
        merge_cfg_options(cfg, cfg_options)
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get("work_dir") is None:
        cfg.work_dir = osp.join("./work_dirs", osp.splitext(osp.basename(path))[0])
    if launcher in _LAUNCH:
        names, how = _LAUNCH[launcher]
        missing = [name for name in names if name not in os.environ]
        if missing:
            tool = "tools/" + osp.basename(sys.argv[0] or "train.py")
            how = how.replace("TOOL", tool)
            raise CLIError(f"--launcher {launcher}: {', '.join(missing)} not set. {how}")
    if launcher == "mpi":  # torch's rendezvous variables from OpenMPI's
        for name, value in zip(("RANK", "WORLD_SIZE", "LOCAL_RANK"), _OMPI):
            os.environ.setdefault(name, os.environ[value])
        os.environ.setdefault("MASTER_PORT", "29500")
    os.environ.setdefault("LOCAL_RANK", str(local_rank))  # mmseg's rule for --local-rank
    if launcher == "pytorch":
        watch_launcher()
    setup_cpu_distributed(cfg, launcher)
    return cfg


def _hook_class(entry: Any) -> Any:
    """The class a hook entry (dict, class or hook object) builds, if known."""
    kind = entry.get("type") if isinstance(entry, dict) else entry
    if isinstance(kind, str):
        return HOOKS.get(kind)
    return kind if isinstance(kind, type) else type(kind)


def add_guard_hooks(cfg: Config) -> list[str]:
    """Give a training config the guards it lacks (its own entry of one wins), an
    ``AtomicCheckpointHook`` for its ``CheckpointHook`` (options kept), and a train loader that
    resumes at the sampler; the type names added or swapped in."""
    hooks = list(cfg.get("custom_hooks") or [])
    present = [cls for cls in map(_hook_class, hooks) if isinstance(cls, type)]
    added = [
        f"mmseg.{g}" for g in GUARD_HOOKS if not any(issubclass(c, HOOKS.get(g)) for c in present)
    ]
    cfg.custom_hooks = hooks + [dict(type=name) for name in added]
    checkpoint = (cfg.get("default_hooks") or {}).get("checkpoint")
    if isinstance(checkpoint, dict) and _hook_class(checkpoint) is CheckpointHook:
        checkpoint["type"] = "mmseg.AtomicCheckpointHook"
        added.append(checkpoint["type"])
    loader = cfg.get("train_dataloader") or {}
    sampler = loader.get("sampler")
    kinds = ("InfiniteSampler", "mmengine.InfiniteSampler", InfiniteSampler)
    if isinstance(sampler, dict) and sampler.get("type") in kinds:
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
    wrapper = cfg.optim_wrapper
    kind = wrapper.get("type", "OptimWrapper")
    if kind in ("AmpOptimWrapper", "CPUAmpOptimWrapper"):
        print_log("AMP training is already enabled in your config.", "current", logging.WARNING)
    elif kind != "OptimWrapper":
        raise CLIError(f"--amp needs optim_wrapper type OptimWrapper, got {kind}")
    elif torch.cuda.is_available() and dtype == "bfloat16":
        wrapper.update(type="AmpOptimWrapper", dtype=dtype, loss_scale=dict(enabled=False))
    elif torch.cuda.is_available():
        wrapper.update(type="AmpOptimWrapper", loss_scale="dynamic")
    elif dtype == "float16":
        wrapper.update(type="CPUAmpOptimWrapper", dtype=dtype, loss_scale="dynamic")
    else:
        wrapper.update(type="CPUAmpOptimWrapper", dtype="bfloat16")


def user_message(err: BaseException) -> str:
    """The error's message on one line (a DataLoader worker's: the original error's)."""
    return one_line(err)


def run_cli(main: Callable[[], None]) -> None:
    """Run ``main``: a user's error (bad option, missing file or dataset, invalid sample, class
    count, unsafe or corrupt checkpoint; also from a DataLoader worker) is one line on stderr and
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
            print(f"error: {user_message(err)}", file=sys.stderr)
        sys.exit(code)
    except KeyboardInterrupt:  # the PreemptionHook's second Ctrl-C, or one before training
        print("interrupted: stopped at once, no checkpoint of this iteration", file=sys.stderr)
        sys.exit(130)
    leave_process_group()  # outside the except block nothing holds the run's frames any more
    if exit_code is not None:
        sys.exit(report_exit(exit_code))
