"""How a run stops on purpose: on every rank at once, with an exit code the launch scripts report
once, also when its torchrun agent dies (docs/robustness.md, "Launchers")."""

import contextlib
import ctypes
import gc
import logging
import os
import signal
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from mmengine.dist import all_reduce
from mmengine.logging import print_log


class TrainingStopped(RuntimeError):
    """Training stopped early on purpose; the process exits with ``exit_code``."""

    label = ""  # printed before the message on stderr

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def agree_max(values: list[int]) -> list[int]:
    """Element-wise maximum over all ranks (a collective)."""
    tensor = torch.tensor(values, dtype=torch.int64)
    all_reduce(tensor, op="max")  # mmengine: nothing outside a group, NCCL's device and back
    return tensor.tolist()


def leave_process_group() -> bool:
    """Destroy the process group and join gloo's threads before the interpreter finalizes (where
    a gloo thread dropping a tensor aborted 2 of 26 two-rank runs). Whether there was one."""
    if not dist.is_initialized():
        return False
    gc.collect()  # the run's reference cycles (runner, hooks, DDP model) and their gloo work
    dist.destroy_process_group()
    gc.collect()  # what still held the group: its destructor joins the threads
    return True


def report_exit(code: int, timeout: float = 30) -> int:
    """The exit code of a rank that stops with ``code``: under the launch scripts
    (``$HAMSEG_RANK_CODES``) 0 once every rank of the folder wrote the same ``code`` there (the
    script exits with it; torchrun or srun print no failure report), else ``code``."""
    folder = os.environ.get("HAMSEG_RANK_CODES")
    if not folder or not code:
        return code
    rank = os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0"))
    Path(folder, f".code.{rank}").write_text(f"{code}\n")
    os.replace(Path(folder, f".code.{rank}"), Path(folder, f"code.{rank}"))
    ranks = int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("SLURM_NTASKS", "1"))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = [name for name in os.listdir(folder) if name.startswith("code.")]
        if len(names) >= ranks:
            codes = {Path(folder, name).read_text().strip() for name in names}
            return 0 if codes == {str(code)} else code
        time.sleep(0.1)
    return code


def agent_argv(pid: int) -> list[str]:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    return []


def launcher_warning(argv: list[str]) -> str | None:
    """One line if the torchrun agent started as ``argv`` (with this environment) can lose a stop
    checkpoint, read with the installed torch's parser; else None."""
    from torch.distributed.run import get_args_parser

    agents = ("torchrun", "torch.distributed.run", "torch.distributed.launch")
    start = next((i + 1 for i, arg in enumerate(argv) if arg.endswith(agents)), len(argv))
    args = vars(get_args_parser().parse_known_args(argv[start:] or ["train.py"])[0])
    timeout = args.get("shutdown_timeout", 30)  # torch >= 2.14; None: the variable's or 30
    timeout = int(timeout or os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT") or 30)
    problems = ["dies of SIGUSR1"] * ("SIGUSR1" not in args.get("signals_to_handle", ""))
    problems += [f"SIGKILLs the ranks {timeout} s after a signal"] * (timeout < 120)
    fix = "start it with PET_SIGNALS_TO_HANDLE=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1 "
    fix += "PET_SHUTDOWN_TIMEOUT=600 in the environment (mim train too) or tools/dist_train.sh"
    if "shutdown_timeout" not in args:  # torch < 2.14: neither can be changed
        fix = "this torch's torchrun takes neither option: a checkpoint must take under 30 s"
    warning = f"torchrun {' and '.join(problems)}, which can lose the stop checkpoint: {fix}"
    return warning if problems else None


def watch_launcher() -> None:
    """In a rank of torchrun's: SIGTERM when the agent dies, :func:`launcher_warning` (rank 0),
    its pid in ``$HAMSEG_RANK_CODES`` (where tools/dist_train.sh waits for it)."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        return
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    if codes := os.environ.get("HAMSEG_RANK_CODES"):
        Path(codes, f"pid.{os.environ['RANK']}").write_text(str(os.getpid()))
    if os.environ["RANK"] == "0" and (warning := launcher_warning(agent_argv(os.getppid()))):
        print_log(warning, "current", logging.WARNING)
