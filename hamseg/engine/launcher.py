"""What a rank started by torchrun does about its launcher (plain torchrun, ``mim train``'s
``torch.distributed.launch``, tools/dist_train.sh). The agent starts every rank in its own session,
so only the agent passes signals on; it dies of a signal it does not handle (SIGUSR1 by default),
and mim SIGKILLs it on Ctrl-C. :func:`watch_launcher` turns the agent's death into a SIGTERM for
the rank (Linux ``PR_SET_PDEATHSIG``), and rank 0 warns when the agent would lose the stop
checkpoint. docs/robustness.md, "Launchers"."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys

from mmengine.logging import print_log

#: What tools/dist_train.sh gives torchrun, as ``PET_SIGNALS_TO_HANDLE`` (and the warning names).
SIGNALS_TO_HANDLE = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"
_AGENTS = ("torchrun", "torch.distributed.run", "torch.distributed.launch")


def agent_argv(pid: int) -> list[str]:
    """The command line of process ``pid`` ([] where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def launcher_warning(argv: list[str]) -> str | None:
    """One line if the torchrun agent started as ``argv`` (with this environment) can lose a stop
    checkpoint, else None. What the agent does is read with the installed torch's parser: torch
    2.6's has neither ``--signals-to-handle`` nor ``--shutdown-timeout`` (nor their ``PET_``
    variables): SIGUSR1 is not passed on and the ranks get SIGKILL 30 s after a signal."""
    from torch.distributed.run import get_args_parser

    start = next((i + 1 for i, arg in enumerate(argv) if arg.endswith(_AGENTS)), len(argv))
    try:
        args, _ = get_args_parser().parse_known_args(argv[start:] or ["train.py"])
    except SystemExit:  # not torchrun's command line: its defaults and the environment
        args, _ = get_args_parser().parse_known_args(["train.py"])
    handled = getattr(args, "signals_to_handle", "SIGTERM,SIGINT,SIGHUP,SIGQUIT")
    timeout = getattr(args, "shutdown_timeout", None)
    if timeout is None and hasattr(args, "shutdown_timeout"):
        timeout = os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT")
    problems = []
    if "SIGUSR1" not in handled.split(","):
        problems.append("dies of SIGUSR1 instead of passing it on to the ranks")
    timeout = int(timeout or 30)
    if timeout < 120:
        problems.append(f"SIGKILLs the ranks {timeout} s after a signal")
    if not problems:
        return None
    if hasattr(args, "shutdown_timeout"):
        fix = f"start it with PET_SIGNALS_TO_HANDLE={SIGNALS_TO_HANDLE} PET_SHUTDOWN_TIMEOUT=600"
        fix += " in the environment (mim train too) or use tools/dist_train.sh"
    else:  # torch 2.6
        fix = "this torch's torchrun has no option for either (newer ones read PET_SIGNALS_TO_"
        fix += "HANDLE, PET_SHUTDOWN_TIMEOUT): the ranks stop on the SIGTERM of its death, without"
        fix += " a slurm requeue, and a checkpoint after SIGTERM/SIGINT must take under 30 s"
    return f"torchrun {' and '.join(problems)}, which can lose the stop checkpoint: {fix}"


def watch_launcher() -> bool:
    """In a rank that torchrun's agent started: SIGTERM when the agent dies, the warning of
    :func:`launcher_warning` (rank 0), its pid in ``$HAMSEG_RANK_CODES``. Whether it has one."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        return False
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    codes = os.environ.get("HAMSEG_RANK_CODES")  # where tools/dist_train.sh waits for the rank
    if codes:
        with open(os.path.join(codes, f"pid.{os.environ.get('RANK', '0')}"), "w") as handle:
            handle.write(str(os.getpid()))
    warning = launcher_warning(agent_argv(os.getppid()))
    if warning and os.environ.get("RANK", "0") == "0":
        print_log(warning, "current", logging.WARNING)
    return True
