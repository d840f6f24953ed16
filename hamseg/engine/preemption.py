"""Checkpoint on a signal (pre-emption, time limit, Ctrl-C), requeue the slurm job, exit 75
(docs/robustness.md, "Pre-emption")."""

import contextlib
import functools
import os
import os.path as osp
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import mmengine.runner.runner as runner_module
from mmengine.dataset import worker_init_fn as mmengine_worker_init_fn
from mmengine.dist import barrier, is_main_process
from mmengine.hooks import CheckpointHook, Hook
from mmengine.logging import print_log
from mmengine.runner import IterBasedTrainLoop
from mmseg.registry import HOOKS

from .checkpoints import ATOMIC_BACKEND
from .stop import TrainingStopped, agent_argv, agree_max

#: Exit code after a signal stop with its checkpoint written (sysexits.h EX_TEMPFAIL).
PREEMPTED_EXIT_CODE = 75


class TrainingPreempted(TrainingStopped):
    """A signal stopped training after the checkpoint of that iteration was written."""


def _obey_parent_only(signals: tuple, parent: int) -> None:
    while True:  # the signals are blocked in this process: they all come here
        if signal.sigwaitinfo(signals).si_pid == parent:
            os._exit(0)  # what torch's worker SIGTERM handler does for its parent


def worker_init_fn(worker_id: int, *args: Any, ignored: tuple, **kwargs: Any) -> None:
    """mmengine's; then only the parent may end the worker with one of the ``ignored`` signals."""
    mmengine_worker_init_fn(worker_id, *args, **kwargs)
    signal.pthread_sigmask(signal.SIG_BLOCK, ignored)  # threads started later inherit it
    threading.Thread(target=_obey_parent_only, args=(ignored, os.getppid()), daemon=True).start()


def protect_workers(signals: Iterable[int]) -> None:
    """DataLoader workers that mmengine's Runner starts from now on ignore ``signals`` (slurm
    signals every process of a job step) unless their parent sends them; () undoes it. mmengine
    0.10.7 gives every loader its module's ``default_worker_init_fn`` (test_upstream_pins)."""
    init = functools.partial(worker_init_fn, ignored=tuple(signals))
    runner_module.default_worker_init_fn = init if signals else mmengine_worker_init_fn


def ignore_signals_until_exit() -> list[int]:
    """Ignore the signals a :class:`PreemptionHook` handles (returned) before the exit: CPython
    resets handlers while it finalizes, and torchrun's SIGTERM would give -15."""
    handlers = {s: getattr(signal.getsignal(s), "__self__", None) for s in signal.valid_signals()}
    ignored = [int(s) for s, hook in handlers.items() if isinstance(hook, PreemptionHook)]
    for signum in ignored:
        signal.signal(signum, signal.SIG_IGN)
    return sorted(ignored)


def resume_command(work_dir: str) -> str:
    """This run's command (the launch script's ``$HAMSEG_COMMAND``, torchrun's or this process's)
    with ``--work-dir`` and ``--resume``, without a ``load_from`` (``--resume`` would take it)."""
    argv = shlex.split(os.environ.get("HAMSEG_COMMAND", ""))
    argv = (
        argv or ("TORCHELASTIC_RUN_ID" in os.environ and agent_argv(os.getppid())) or sys.orig_argv
    )
    kept = [arg for arg in argv if not arg.startswith(("load_from=", "resume="))] + ["--"]
    # a --cfg-options left without items goes too
    command = [a for a, b in zip(kept, kept[1:]) if a != "--cfg-options" or not b.startswith("-")]
    if not any(arg.startswith("--work-dir") for arg in argv):
        command += ["--work-dir", work_dir]
    return shlex.join(command + ["--resume"] * ("--resume" not in argv))


def _signum(spec: str | int) -> int:
    if isinstance(spec, str):  # 'SIGUSR1' or 'usr1'
        return signal.Signals["SIG" + spec.upper().removeprefix("SIG")]
    return signal.Signals(spec)


@HOOKS.register_module()
class PreemptionHook(Hook):
    """On a signal: finish the iteration, checkpoint it once all ranks agree, requeue, stop.

    Args:
        signals: Names or numbers of the signals that stop training; [] turns the hook off.
        requeue: Requeue the slurm job after the checkpoint; None: if ``SLURM_JOB_ID`` is set.
        requeue_signals: Which of ``signals`` requeue (not SIGTERM: ``scancel`` sends it).
    """

    priority = "LOWEST"  # after CheckpointHook: reuses a checkpoint of this iteration

    def __init__(
        self,
        signals: Sequence[str | int] = ("SIGTERM", "SIGUSR1", "SIGINT"),
        requeue: bool | None = None,
        requeue_signals: Sequence[str | int] = ("SIGUSR1",),
    ) -> None:
        self.signals = tuple(map(_signum, signals))
        self.requeue_signals = tuple(map(_signum, requeue_signals))
        self.requeue = "SLURM_JOB_ID" in os.environ if requeue is None else requeue
        self.received: list[signal.Signals] = []  # in order of arrival; the handler only records
        self.previous: dict[int, Any] = {}
        self.stopped: str | None = None  # the stop line, once stopped
        protect_workers(self.signals)  # the train DataLoader starts its workers before_run

    def handle(self, signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and signum in self.received:
            raise KeyboardInterrupt  # a second Ctrl-C: abort at once
        if signum not in self.received:
            self.received.append(signal.Signals(signum))

    def before_train(self, runner) -> None:
        for signum in self.signals:
            with contextlib.suppress(ValueError):  # not the main thread: no handler there
                self.previous[signum] = signal.signal(signum, self.handle)

    def after_train_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs=None):
        requeue = any(s in self.requeue_signals for s in self.received)
        stop, requeue = agree_max([int(bool(self.received)), int(requeue)])  # every iteration
        step = runner.iter + 1
        if not stop or self.stopped is not None or step >= runner.max_iters:
            return  # at the last iteration the run is complete: CheckpointHook saves it
        names = "/".join(s.name for s in self.received) or "a signal to another rank"
        print_log(f"{names} received: stopping after iteration {step}", logger="current")
        message = f"training stopped by {names} after iteration {step}: {self.save(runner)} written"
        if requeue and self.requeue:
            message += self.requeue_job()
        barrier()  # no rank exits (and is reported failed) before the save and requeue are done
        self.stopped = f"{message}; continue with: {resume_command(runner.work_dir)}"
        loop = runner.train_loop
        if not isinstance(loop, IterBasedTrainLoop):  # checks stop_training between epochs only
            raise TrainingPreempted(self.stopped, PREEMPTED_EXIT_CODE)
        loop.stop_training = True  # the loop ends; after_train/after_run hooks still run
        loop.val_begin = loop.max_iters + 1  # no validation of this iteration: time is short

    def after_run(self, runner) -> None:
        """Leave ``runner.train()`` after a stop (signals until the exit are only recorded); put
        the handlers back after a complete run."""
        if self.stopped is not None:
            raise TrainingPreempted(self.stopped, PREEMPTED_EXIT_CODE)
        for signum, previous in self.previous.items():
            signal.signal(signum, signal.SIG_DFL if previous is None else previous)
        protect_workers(())

    def save(self, runner) -> str:
        """Checkpoint this iteration (every rank calls, the main rank writes); its path."""
        step = runner.iter + 1
        hook = next((h for h in runner.hooks if isinstance(h, CheckpointHook)), None)
        if hook is not None and not hook.by_epoch:
            path = hook.file_backend.join_path(hook.out_dir, hook.filename_tmpl.format(step))
            if hook.last_ckpt != path:  # not just written by the periodic save
                hook._save_checkpoint(runner)  # pointer, max_keep_ckpts (test_upstream_pins)
            return path
        backend = dict(backend=ATOMIC_BACKEND)  # found by --resume without a pointer
        runner.save_checkpoint(runner.work_dir, f"iter_{step}.pth", backend_args=backend)
        return osp.join(runner.work_dir, f"iter_{step}.pth")

    def requeue_job(self) -> str:
        """``scontrol requeue $SLURM_JOB_ID`` on the main rank; a note for the stop line."""
        job = os.environ.get("SLURM_JOB_ID", "")
        if not is_main_process():
            return "; slurm job requeued by the main rank"
        command = ["scontrol", "requeue", job]
        try:
            subprocess.run(command, check=True, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as err:
            failure = (getattr(err, "stderr", None) or str(err)).strip()
            return f"; requeueing slurm job {job} failed ({failure})"
        return f"; slurm job {job} requeued"
