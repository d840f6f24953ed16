"""What the tools share: the config with its overrides and launcher, ``--amp``, the guard hooks, and
:func:`run_cli`, the one place where a library error becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import logging
import os
import os.path as osp
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch
from mmengine.config import Config
from mmengine.dataset import InfiniteSampler
from mmengine.dist import is_main_process
from mmengine.hooks import CheckpointHook
from mmengine.logging import print_log
from mmseg.registry import HOOKS

from hamseg.compat.checkpoint import CorruptCheckpointError, UnsafeCheckpointError
from hamseg.compat.config_variables import apply_config_variables
from hamseg.compat.package_lookup import config_file
from hamseg.datasets.checks import ClassCountError
from hamseg.datasets.loading import InvalidSampleError
from hamseg.engine import TrainingStopped, setup_cpu_distributed
from hamseg.engine.launcher import watch_launcher
from hamseg.engine.preemption import ignore_signals_until_exit
from hamseg.engine.stop import leave_process_group, report_exit
from hamseg.utils.config import merge_cfg_options
from hamseg.utils.errors import UsageError
from hamseg.utils.messages import one_line

#: The guards tools/train.py adds to every training config (hamseg.engine), in this order.
GUARD_HOOKS = ("PreemptionHook", "NonFiniteLossHook", "RandomStateHook")
#: mmengine's InfiniteSampler under the names a config may give it.
_INFINITE = ("InfiniteSampler", "mmengine.InfiniteSampler", InfiniteSampler)
#: ``--launcher`` choices, as in mmseg's tools.
LAUNCHERS = ("none", "pytorch", "slurm", "mpi")
#: What OpenMPI's mpirun sets in every process; mmengine's mpi launcher reads them.
_OMPI = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")
#: Per launcher: what its processes need in their environment, and how to start them (TOOL: the
#: running script).
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


class CLIError(UsageError):
    """A bad command line: printed as one line, exit code 2, no traceback."""


def _check_launch_env(launcher: str) -> None:
    """One line naming the variables the launcher's starter (mpirun, srun) should have set; for
    mpi, torch's rendezvous variables from OpenMPI's."""
    names, how = _LAUNCH[launcher]
    missing = [name for name in names if name not in os.environ]
    if missing:
        tool = "tools/" + osp.basename(sys.argv[0] or "train.py")
        raise CLIError(
            f"--launcher {launcher}: {', '.join(missing)} not set. " + how.replace("TOOL", tool)
        )
    if launcher == "mpi":
        for name, value in zip(("RANK", "WORLD_SIZE", "LOCAL_RANK"), _OMPI):
            os.environ.setdefault(name, os.environ[value])
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
        config: A config file or a packaged name (``hamseg::demo/x.py``, ``mmseg::fcn/x.py``).
        cfg_options: ``--cfg-options`` overrides (``data_root=PATH`` moves every dataset; a
            top-level variable such as ``seg_map_suffix`` acts as if edited in the file).
        work_dir: ``--work-dir``; default ``./work_dirs/<config name>``.
        launcher: One of :data:`LAUNCHERS`. On CPU machines a gloo group is set up here.
        local_rank: ``--local-rank``: becomes ``LOCAL_RANK`` unless the launcher set it (mmseg's
            rule for ``torch.distributed.launch`` without ``--use-env``).
    """
    path = config_file(config)
    cfg = Config.fromfile(path)
    cfg.launcher = launcher
    if cfg_options:
        apply_config_variables(cfg, cfg_options)  # seg_map_suffix=...: as if edited in the file
        merge_cfg_options(cfg, cfg_options)
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get("work_dir") is None:
        cfg.work_dir = osp.join("./work_dirs", osp.splitext(osp.basename(path))[0])
    if launcher in _LAUNCH:
        _check_launch_env(launcher)
    os.environ.setdefault("LOCAL_RANK", str(local_rank))
    if launcher == "pytorch":
        watch_launcher()  # torchrun's death stops this rank; a warning about torchrun's settings
    setup_cpu_distributed(cfg, launcher)
    return cfg


def cfg_options_argv(argv: Sequence[str]) -> list[str]:
    """The ``--cfg-options`` part of a command line (every occurrence, as one), to repeat it in a
    suggested command: ``['--cfg-options', 'k=v', ...]`` or []."""
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


def _hook_class(entry: Any) -> Any:
    """The class a hook entry (dict, class or hook object) builds, if known."""
    kind = entry.get("type") if isinstance(entry, dict) else entry
    return (
        HOOKS.get(kind) if isinstance(kind, str) else kind if isinstance(kind, type) else type(kind)
    )


def add_guard_hooks(cfg: Config) -> list[str]:
    """What ``tools/train.py`` gives every config: the guards it lacks (its own entry of one,
    under any registered name, wins with its options), an ``AtomicCheckpointHook`` in place of
    its ``CheckpointHook`` (options kept) and a train loader that resumes at the sampler. The
    type names added or swapped in."""
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
    return added + _resumable_data(cfg.get("train_dataloader") or {})


def _resumable_data(loader: dict) -> list[str]:
    """The train loader's ``InfiniteSampler`` becomes a ``ResumableInfiniteSampler`` (same
    indices) and its collate function tags batches with their worker's RNG state, so that a
    resume skips the trained batches at the sampler; the names swapped in."""
    sampler = loader.get("sampler")
    if not isinstance(sampler, dict) or sampler.get("type") not in _INFINITE:
        return []
    sampler["type"] = "mmseg.ResumableInfiniteSampler"
    collate = loader.get("collate_fn", dict(type="pseudo_collate"))
    if not isinstance(collate, dict):  # a callable: its batches carry no state (replay)
        return [sampler["type"]]
    loader["collate_fn"] = dict(type="collate_with_worker_rng", collate=collate)
    return [sampler["type"], "collate_with_worker_rng"]


def enable_amp(cfg: Config, dtype: str | None = None) -> None:
    """mmseg's ``--amp``: fp16 ``AmpOptimWrapper`` with dynamic loss scaling on a GPU, bfloat16
    ``CPUAmpOptimWrapper`` without one. ``dtype='bfloat16'`` on a GPU: bfloat16 autocast
    without a loss scaler (bfloat16 has float32's range; the scaler's checks cost 1.2x per
    iteration on an H200, docs/gpu.md)."""
    wrapper = cfg.optim_wrapper
    if wrapper.get("type", "OptimWrapper") in ("AmpOptimWrapper", "CPUAmpOptimWrapper"):
        print_log("AMP training is already enabled in your config.", "current", logging.WARNING)
        return
    if wrapper.get("type", "OptimWrapper") != "OptimWrapper":
        raise CLIError(f"--amp needs optim_wrapper type OptimWrapper, got {wrapper.type}")
    if torch.cuda.is_available() and dtype == "bfloat16":
        wrapper.update(type="AmpOptimWrapper", dtype=dtype, loss_scale=dict(enabled=False))
    elif torch.cuda.is_available():
        wrapper.update(type="AmpOptimWrapper", loss_scale="dynamic")
    elif dtype == "float16":
        wrapper.update(type="CPUAmpOptimWrapper", dtype=dtype, loss_scale="dynamic")
    else:
        wrapper.update(type="CPUAmpOptimWrapper", dtype="bfloat16")


#: How torch re-raises an error of a DataLoader worker: its message wraps the worker's traceback.
_WORKER = re.compile(r"^Caught \w+ in DataLoader worker process \d+\.\s*Original Traceback", re.S)


def user_message(err: BaseException) -> str:
    """The error's message on one line; for an error re-raised from a DataLoader worker, the
    original error's own message instead of torch's wrapper with the worker's traceback."""
    text = str(err)
    if _WORKER.match(text):
        name = re.escape(type(err).__name__)
        heads = list(re.finditer(rf"\n(?:[\w.]+\.)?{name}: ", text))
        if heads:  # the traceback ends with the original "module.Type: message"
            text = text[heads[-1].end() :]
    return one_line(text)


def run_cli(main: Callable[[], None]) -> None:
    """Run ``main``; a user-facing error becomes one line on stderr and exit code 2.

    User-facing: a bad option (:class:`~hamseg.utils.errors.UsageError`, :class:`CLIError`), a
    missing file or dataset, an invalid sample, a class count that differs from the dataset's,
    an unsafe or corrupt checkpoint, also when raised in a DataLoader worker. A run stopped on
    purpose (:class:`~hamseg.engine.stop.TrainingStopped`: signal 75, divergence 65) is one
    line from the main rank and its exit code (also written to
    ``$HAMSEG_RANK_CODES/code.RANK``), with the hook's signals ignored until the exit; Ctrl-C
    that aborts (a second one) is one line and 130. Anything else keeps its traceback. A
    distributed run leaves its process group first.
    """
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
    # Out of the except block nothing holds the run's frames (runner, DDP model) any more: the
    # process group and its threads can go now, while the interpreter is whole.
    leave_process_group()
    if exit_code is not None:
        sys.exit(report_exit(exit_code))
