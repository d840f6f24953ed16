"""What a rank started by torchrun does about its launcher (torch 2.14's elastic agent: plain
torchrun, ``mim train --launcher pytorch``'s ``torch.distributed.launch``, tools/dist_train.sh).

The agent starts every rank in its own session, so only the agent can pass a signal on; it dies
of a SIGUSR1 it does not handle, and mim SIGKILLs it on Ctrl-C. :func:`watch_launcher` makes the
agent's death a SIGTERM for the rank (Linux ``PR_SET_PDEATHSIG``): the ranks stop after the same
iteration with their checkpoint instead of training on unsupervised. It also warns when the
agent would lose a stop checkpoint (SIGUSR1 not passed on; SIGKILL after 30 s), and leaves the
rank's pid where tools/dist_train.sh waits for it. docs/robustness.md, "Launchers"."""

from __future__ import annotations

import ctypes
import logging
import os
import os.path as osp
import signal
import sys

from mmengine.logging import print_log

#: ``prctl`` option: the signal this process gets when its parent (thread) exits.
_PR_SET_PDEATHSIG = 1
#: Seconds under which torchrun's shutdown timeout is named in the warning.
SHORT_SHUTDOWN = 120
#: What tools/dist_train.sh gives torchrun (and what the warning suggests).
SIGNALS_TO_HANDLE = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"


def _shutdown_timeout(parent: int) -> int:
    """The agent's shutdown timeout: its ``--shutdown-timeout``, else torch's environment
    variables (inherited by the rank), else torch's default of 30 s."""
    try:
        with open(f"/proc/{parent}/cmdline", "rb") as handle:
            argv = handle.read().decode(errors="replace").split("\0")
    except OSError:
        argv = []
    for i, arg in enumerate(argv):
        name, _, value = arg.partition("=")
        if name in ("--shutdown-timeout", "--shutdown_timeout"):
            value = value or (argv[i + 1] if i + 1 < len(argv) else "")
            return int(value) if value.isdigit() else 30
    for name in ("PET_SHUTDOWN_TIMEOUT", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 30


def launcher_warning(parent: int) -> str | None:
    """One line if the torchrun agent ``parent`` can lose a stop checkpoint, else None."""
    handled = os.environ.get("TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT,SIGHUP,SIGQUIT")
    timeout = _shutdown_timeout(parent)
    problems = []
    if "SIGUSR1" not in handled.split(","):
        problems.append("dies of SIGUSR1 instead of passing it on to the ranks")
    if timeout < SHORT_SHUTDOWN:
        problems.append(f"SIGKILLs the ranks {timeout} s after a signal")
    if not problems:
        return None
    return (
        f"torchrun {' and '.join(problems)}, which can lose the stop checkpoint: start it with "
        f"PET_SIGNALS_TO_HANDLE={SIGNALS_TO_HANDLE} PET_SHUTDOWN_TIMEOUT=600 in the environment "
        "(mim train too) or use tools/dist_train.sh"
    )


def watch_launcher() -> bool:
    """In a rank that torchrun's agent started: SIGTERM when the agent dies, the warning of
    :func:`launcher_warning` (rank 0), the pid in ``$HAMSEG_RANK_CODES/pid.RANK``. Whether
    the rank has such an agent."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        return False
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    codes = os.environ.get("HAMSEG_RANK_CODES")
    if codes:
        with open(osp.join(codes, f"pid.{os.environ.get('RANK', '0')}"), "w") as handle:
            handle.write(str(os.getpid()))
    warning = launcher_warning(parent)
    if warning and os.environ.get("RANK", "0") == "0":
        print_log(warning, "current", logging.WARNING)
    return True
