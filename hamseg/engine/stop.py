"""How a run stops on purpose: on every rank at once, with an exit code the launch scripts report
once, also when its torchrun agent dies; a diverged run before it saves non-finite weights
(docs/robustness.md, "Launchers", "Divergence")."""

import contextlib
import ctypes
import gc
import logging
import math
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from mmengine.dist import all_reduce
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmseg.registry import HOOKS

from hamseg.utils.errors import first_items


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


#: Exit code of a diverged run (sysexits.h EX_DATAERR: resuming would diverge again).
DIVERGED_EXIT_CODE = 65


class TrainingDiverged(TrainingStopped):
    """Training stopped on a non-finite loss or weights, before saving them."""

    label = "error: "


def _scales(wrapper: Any) -> list[float]:  # of the enabled loss scalers (OptimWrapperDict too)
    wrappers = wrapper.values() if hasattr(wrapper, "values") else [wrapper]
    scalers = [getattr(w, "loss_scaler", None) for w in wrappers]
    return [s.get_scale() for s in scalers if s is not None and s.is_enabled()]


@HOOKS.register_module()
class NonFiniteLossHook(Hook):
    """Raise :class:`TrainingDiverged` on every rank when a loss or the weights become non-finite.

    Args:
        max_consecutive_skips: Under a loss scaler, the steps in a row it may skip (its scale
            went down or the loss was non-finite) before the run counts as diverged.
        check_weights: Also check float parameters and buffers after each update.
    """

    priority = 80  # after LoggerHook (60) and ParamSchedulerHook (70), before CheckpointHook (90)

    def __init__(self, max_consecutive_skips: int = 20, check_weights: bool = True) -> None:
        self.max_consecutive_skips = max_consecutive_skips
        self.check_weights = check_weights
        self.skips = 0
        self.scales: list[float] = []

    def before_train_iter(self, runner, batch_idx: int, data_batch: Any = None) -> None:
        self.scales = _scales(runner.optim_wrapper)

    def after_train_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs=None):
        losses = {k: torch.as_tensor(v).detach().float() for k, v in outputs.items() if "loss" in k}
        checks = [torch.cat([v.reshape(-1) for v in losses.values()]).isfinite().all()]
        model = runner.model
        if self.check_weights:  # the largest magnitude over all float tensors: one reduction
            tensors = [t for t in (*model.parameters(), *model.buffers()) if t.is_floating_point()]
            largest = torch.nn.utils.get_total_norm(tensors, norm_type=math.inf)
            checks.append(largest.isfinite().to(checks[0].device))
        loss_ok, weights_ok = (torch.stack(checks).tolist() + [True])[:2]  # one host sync
        scales = _scales(runner.optim_wrapper)
        skipped = scales and (not loss_ok or any(a < b for a, b in zip(scales, self.scales)))
        self.skips = self.skips + 1 if skipped else 0
        # the problem: 3 skips, 2 loss, 1 weights, 0 none; the largest of all ranks wins
        failed = [
            not weights_ok,
            not loss_ok and not scales,
            self.skips > self.max_consecutive_skips,
        ]
        mine = max(i * bad for i, bad in enumerate(failed, 1))
        (problem,) = agree_max([mine])
        if not problem:
            return
        step = runner.iter + 1  # from 1, as in the log and iter_N.pth
        shown = "on another rank"
        if mine == problem:
            shown = ", ".join(f"{k}={float(v.mean()):.4g}" for k, v in losses.items())
        if mine == problem == 1:
            named = (*model.named_parameters(), *model.named_buffers())
            bad = [n for n, t in named if t.is_floating_point() and not t.isfinite().all()]
            shown += f"; non-finite: {first_items(bad, 3)}"
        what = [
            f"non-finite parameters or buffers after iteration {step} ({shown})",
            f"non-finite loss at iteration {step} ({shown})",
            f"non-finite gradients at iteration {step}: the loss scaler skipped {self.skips} "
            f"steps in a row (max_consecutive_skips={self.max_consecutive_skips}; {shown})",
        ][problem - 1]
        latest = runner.message_hub.get_info("last_ckpt")
        kept = f"the latest checkpoint is {latest}" if latest else "no checkpoint was written"
        message = f"{what}; stopped without saving these weights ({kept})"
        raise TrainingDiverged(message, DIVERGED_EXIT_CODE)
