"""What tools/train.py and tools/test.py share: config, overrides, launcher, clean errors."""

from __future__ import annotations

import logging
import os
import os.path as osp
import sys
from collections.abc import Callable

import torch
from mmengine.config import Config
from mmengine.logging import print_log

from hamseg.compat import setup_cpu_distributed

__all__ = ["LAUNCHERS", "CLIError", "build_config", "enable_amp", "require_file", "run_cli"]

#: ``--launcher`` choices, as in mmseg's tools.
LAUNCHERS = ("none", "pytorch", "slurm", "mpi")
#: What OpenMPI's mpirun sets in every process; mmengine's mpi launcher reads them.
_OMPI = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")


class CLIError(Exception):
    """A user-facing error: printed as one line, exit code 2, no traceback."""


def require_file(path: str, what: str) -> str:
    """Return ``path`` if it is a file, else raise :class:`CLIError` naming it."""
    if not osp.isfile(path):
        raise CLIError(f"{what} not found: {path}")
    return path


def _mpi_env() -> None:
    """Check that OpenMPI's mpirun started this process; give torch its rendezvous variables."""
    missing = [name for name in (*_OMPI, "MASTER_ADDR") if name not in os.environ]
    if missing:
        raise CLIError(
            f"--launcher mpi: {', '.join(missing)} not set. Start the processes with OpenMPI's "
            "mpirun (install OpenMPI, e.g. apt install openmpi-bin): mpirun -np N -x "
            "MASTER_ADDR=HOST [-x MASTER_PORT=PORT] python tools/train.py CONFIG --launcher mpi"
        )
    os.environ.setdefault("RANK", os.environ["OMPI_COMM_WORLD_RANK"])
    os.environ.setdefault("WORLD_SIZE", os.environ["OMPI_COMM_WORLD_SIZE"])
    os.environ.setdefault("LOCAL_RANK", os.environ["OMPI_COMM_WORLD_LOCAL_RANK"])
    os.environ.setdefault("MASTER_PORT", "29500")


def build_config(
    config: str,
    cfg_options: dict | None = None,
    work_dir: str | None = None,
    launcher: str = "none",
    local_rank: int = 0,
) -> Config:
    """Load a config as mmseg's tools do and prepare the launcher.

    Args:
        config: Path of the config file.
        cfg_options: ``--cfg-options`` overrides.
        work_dir: ``--work-dir``; default ``./work_dirs/<config name>``.
        launcher: One of :data:`LAUNCHERS`. On CPU machines a gloo group is set up here.
        local_rank: ``--local-rank``: becomes ``LOCAL_RANK`` unless the launcher set it (as in
            mmseg; ``torch.distributed.launch`` without ``--use-env`` passes only the argument).

    Returns:
        The config, with ``launcher`` and ``work_dir`` set.

    Raises:
        CLIError: A missing config, or ``--launcher mpi`` outside OpenMPI's mpirun.
    """
    cfg = Config.fromfile(require_file(config, "config file"))
    cfg.launcher = launcher
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get("work_dir") is None:
        cfg.work_dir = osp.join("./work_dirs", osp.splitext(osp.basename(config))[0])
    if launcher == "mpi":
        _mpi_env()
    os.environ.setdefault("LOCAL_RANK", str(local_rank))
    setup_cpu_distributed(cfg, launcher)
    return cfg


def enable_amp(cfg: Config) -> None:
    """Switch the optimizer wrapper to mixed precision, as mmseg's ``--amp`` does.

    fp16 ``AmpOptimWrapper`` with dynamic loss scaling on a GPU; bfloat16
    ``CPUAmpOptimWrapper`` without a GPU.
    """
    wrapper = cfg.optim_wrapper
    if wrapper.get("type", "OptimWrapper") in ("AmpOptimWrapper", "CPUAmpOptimWrapper"):
        print_log("AMP training is already enabled in your config.", "current", logging.WARNING)
        return
    if wrapper.get("type", "OptimWrapper") != "OptimWrapper":
        raise CLIError(f"--amp needs optim_wrapper type OptimWrapper, got {wrapper.type}")
    if torch.cuda.is_available():
        wrapper.update(type="AmpOptimWrapper", loss_scale="dynamic")
    else:
        wrapper.update(type="CPUAmpOptimWrapper", dtype="bfloat16")


def run_cli(main: Callable[[], None]) -> None:
    """Run ``main``; a user-facing error becomes one line on stderr and exit code 2.

    User-facing: :class:`CLIError`, a missing file or dataset, an invalid sample (bad label,
    corrupt image), and a checkpoint refused as unsafe or corrupt. A run stopped on purpose
    (:class:`~hamseg.engine.stop.TrainingStopped`: a signal, code 75; divergence, code 65) is
    one line from the main rank and its own exit code. Anything else keeps its traceback.
    """
    from mmengine.dist import is_main_process

    from hamseg.compat.checkpoint import CorruptCheckpointError, UnsafeCheckpointError
    from hamseg.datasets.checks import InvalidSampleError
    from hamseg.engine.stop import TrainingStopped

    user_errors = (
        CLIError,
        FileNotFoundError,
        InvalidSampleError,
        UnsafeCheckpointError,
        CorruptCheckpointError,
    )
    try:
        main()
    except TrainingStopped as stop:
        if is_main_process():
            print(f"{stop.label}{' '.join(str(stop).split())}", file=sys.stderr)
        sys.exit(stop.exit_code)
    except user_errors as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        sys.exit(2)
