"""Checkpoint on a signal (pre-emption, time limit), requeue the slurm job, exit with code 75.

mmengine has no signal handling: a SIGTERM ends the process at once and everything since the
last periodic checkpoint is lost. :class:`PreemptionHook` (``tools/train.py`` adds it to every
config that has none) turns a signal into a clean stop:

1. The handler only records the signal (nothing else is safe in a handler; a second signal while
   the checkpoint is written is recorded and otherwise ignored, and the write itself is atomic,
   :mod:`hamseg.engine.checkpoints`).
2. The current iteration finishes. In ``after_train_iter`` every rank joins one small
   all-reduce (:func:`~hamseg.engine.stop.agree_max`), so a signal that reached a single rank
   stops all of them after the same iteration.
3. The checkpoint of that iteration is written through mmengine's ``CheckpointHook`` (the
   usual ``iter_N.pth``, ``last_checkpoint`` pointer, ``max_keep_ckpts`` bookkeeping; reused
   if the hook has just written it), so ``--resume`` restores weights, optimizer, schedule and
   iteration.
4. Under slurm, for a requeue signal (SIGUSR1 by default), the main rank runs
   ``scontrol requeue $SLURM_JOB_ID`` once; every rank waits for it at a barrier.
5. Validation is skipped, the loop ends, the usual ``after_train``/``after_run`` hooks run (logs
   and visualizer backends are closed), then :class:`TrainingPreempted` leaves ``runner.train()``
   and the process exits with :data:`PREEMPTED_EXIT_CODE` (75, ``EX_TEMPFAIL`` of sysexits.h:
   "temporary failure, try again"; 0 would mean a finished run, 2 a usage error). Until then
   further signals are recorded, and from the moment ``tools/train.py`` exits they are ignored
   (:func:`ignore_signals_until_exit`).

SIGTERM does not requeue by default: ``scancel`` sends SIGTERM too, and a cancelled job must
stay cancelled. tools/slurm_submit.sh asks slurm for SIGUSR1 a few minutes before the time limit.
"""

from __future__ import annotations

import logging
import os
import os.path as osp
import signal
import subprocess
from collections.abc import Sequence
from typing import Any, Optional, Union

from mmengine.dist import barrier, is_main_process
from mmengine.hooks import CheckpointHook, Hook
from mmengine.logging import print_log
from mmengine.runner import IterBasedTrainLoop
from mmseg.registry import HOOKS

from hamseg.engine import worker_signals
from hamseg.engine.checkpoints import atomic_write_bytes

from .stop import TrainingStopped, agree_max

__all__ = [
    "PREEMPTED_EXIT_CODE",
    "PreemptionHook",
    "TrainingPreempted",
    "ignore_signals_until_exit",
]

#: Exit code of a run stopped by a signal after writing its checkpoint (sysexits.h EX_TEMPFAIL).
PREEMPTED_EXIT_CODE = 75

SignalSpec = Union[str, int]


def _signum(spec: SignalSpec) -> int:
    """``'SIGUSR1'``, ``'USR1'`` or ``10`` -> 10."""
    if isinstance(spec, int):
        return int(signal.Signals(spec))
    name = spec.upper()
    return int(signal.Signals[name if name.startswith("SIG") else f"SIG{name}"])


def ignore_signals_until_exit() -> list[int]:
    """Ignore the signals a :class:`PreemptionHook` handles, for a process about to exit.

    ``tools/train.py`` (:func:`hamseg.cli.run_cli`) calls this once a run has stopped
    (:class:`~hamseg.engine.stop.TrainingStopped`, exit code 75 or 65). The exit takes seconds
    (module, C++ and process-group teardown), and while it finalizes, CPython (``_PySignal_Fini``)
    puts the default action back for every signal with a Python handler, so a signal then, e.g.
    the SIGTERM torchrun sends to every rank once one has exited, would end the process with
    -15 instead of its exit code. ``SIG_IGN`` is the one handler CPython leaves in place.

    Returns:
        The signal numbers now ignored (main thread only; none elsewhere).
    """
    ignored = []
    for signum in signal.valid_signals():
        try:
            handler = signal.getsignal(signum)
        except (OSError, ValueError):  # not a signal of this platform
            continue
        if isinstance(getattr(handler, "__self__", None), PreemptionHook):
            try:
                signal.signal(signum, signal.SIG_IGN)
            except ValueError:  # not the main thread
                return ignored
            ignored.append(int(signum))
    return ignored


class TrainingPreempted(TrainingStopped):
    """A signal stopped training after a checkpoint was written (exit code 75 by default)."""


@HOOKS.register_module()
class PreemptionHook(Hook):
    """On a signal, finish the iteration, checkpoint it on every rank's agreement, requeue, exit.

    Args:
        signals: Signals that stop training (names or numbers). Default SIGTERM and SIGUSR1.
            An empty list turns the hook off.
        requeue: Requeue the slurm job after the checkpoint. None (default): when the
            environment variable ``SLURM_JOB_ID`` is set.
        requeue_signals: Which of ``signals`` requeue (default SIGUSR1 only: ``scancel``
            sends SIGTERM, and a cancelled job must stay cancelled).
        exit_code: Exit code of the stopped process (default 75).
    """

    priority = "LOWEST"  # after CheckpointHook (VERY_LOW): reuses a checkpoint of this iteration

    def __init__(
        self,
        signals: Sequence[SignalSpec] = ("SIGTERM", "SIGUSR1"),
        requeue: Optional[bool] = None,
        requeue_signals: Sequence[SignalSpec] = ("SIGUSR1",),
        exit_code: int = PREEMPTED_EXIT_CODE,
    ) -> None:
        self.signals = tuple(_signum(s) for s in signals)
        self.requeue_signals = tuple(_signum(s) for s in requeue_signals)
        self.requeue = "SLURM_JOB_ID" in os.environ if requeue is None else bool(requeue)
        self.exit_code = int(exit_code)
        self.received: list[int] = []  # signal numbers, in order of arrival (written by handler)
        self._previous: dict[int, Any] = {}
        self._stop: Optional[str] = None  # the message once training was stopped
        # the train DataLoader starts its workers before before_train: set them up from the start
        worker_signals.install(self.signals)

    # -- signal handling ------------------------------------------------------------------
    def _handler(self, signum: int, frame: Any) -> None:
        if signum not in self.received:  # only record: logging, saving, ... happen in the loop
            self.received.append(signum)

    def before_train(self, runner) -> None:
        """Install the handlers (main thread only; before resume's dataloader fast-forward)."""
        for signum in self.signals:
            try:
                self._previous[signum] = signal.signal(signum, self._handler)
            except ValueError:  # not the main thread: signals cannot be caught here
                print_log(
                    f"PreemptionHook: cannot catch {signal.Signals(signum).name} outside the "
                    "main thread; training will not checkpoint on it",
                    logger="current",
                    level=logging.WARNING,
                )

    def restore_signal_handlers(self) -> None:
        """Put back the handlers that were installed before training (done after a complete
        run; after a stop, for a caller that keeps the process alive)."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()
        worker_signals.uninstall()

    # -- the stop ---------------------------------------------------------------------------
    def after_train_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs=None):
        """Stop every rank after this iteration if any rank received a signal."""
        wants_requeue = any(s in self.requeue_signals for s in self.received)
        stop, requeue = agree_max([int(bool(self.received)), int(wants_requeue)])
        if not stop or self._stop is not None:
            return
        step = runner.iter + 1
        if step >= runner.max_iters:
            return  # the run is complete: CheckpointHook saves the last iteration anyway
        names = (
            "/".join(signal.Signals(s).name for s in self.received) or "a signal to another rank"
        )
        print_log(f"{names} received: stopping after iteration {step}", logger="current")
        path = self._save(runner, step)
        message = f"training stopped by {names} after iteration {step}: {path} written"
        if requeue and self.requeue:
            message += self._requeue()
        barrier()  # no rank exits (and is reported failed) before the save and requeue are done
        self._stop = f"{message}; continue with --resume"
        loop = runner.train_loop
        if isinstance(loop, IterBasedTrainLoop):
            loop.stop_training = True  # the loop ends; after_train/after_run hooks still run
            loop.val_begin = loop.max_iters + 1  # no validation of this iteration: time is short
        else:  # an epoch-based loop only checks stop_training between epochs
            raise TrainingPreempted(self._stop, self.exit_code)

    def after_run(self, runner) -> None:
        """Leave ``runner.train()`` with :class:`TrainingPreempted` after a stop (the handlers
        stay: until the process exits, a signal, e.g. torchrun's SIGTERM when another rank has
        exited first, is only recorded); restore the handlers after a complete run."""
        if self._stop is not None:
            raise TrainingPreempted(self._stop, self.exit_code)
        self.restore_signal_handlers()

    def _save(self, runner, step: int) -> str:
        """Write the checkpoint of iteration ``step`` (all ranks call; the main rank writes)."""
        hook = next((h for h in runner.hooks if isinstance(h, CheckpointHook)), None)
        if hook is not None and not hook.by_epoch:
            path = hook.file_backend.join_path(hook.out_dir, hook.filename_tmpl.format(step))
            if hook.last_ckpt != path:  # not written by the periodic save of this iteration
                hook._save_checkpoint(runner)  # mmengine's save path: pointer, max_keep_ckpts
            return path
        # no iteration-based CheckpointHook: iter_N.pth in the work dir and the pointer to it
        name = f"iter_{step}.pth"
        meta = dict(epoch=runner.epoch, iter=step)
        runner.save_checkpoint(runner.work_dir, name, meta=meta, by_epoch=False)
        path = osp.join(runner.work_dir, name)
        if is_main_process():
            pointer = osp.join(runner.work_dir, "last_checkpoint")
            atomic_write_bytes(pointer, lambda handle: handle.write(path), mode="w")
        return path

    def _requeue(self) -> str:
        """Run ``scontrol requeue $SLURM_JOB_ID`` on the main rank; a note for the message."""
        job = os.environ.get("SLURM_JOB_ID")
        if not is_main_process():
            return "; slurm job requeued by the main rank"
        if job is None:
            print_log(
                "requeue asked for but SLURM_JOB_ID is not set",
                logger="current",
                level=logging.WARNING,
            )
            return ""
        command = ["scontrol", "requeue", job]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=120)
            failure = result.stderr.strip() if result.returncode else None
        except (OSError, subprocess.TimeoutExpired) as err:
            failure = str(err)
        if failure is not None:
            print_log(
                f"{' '.join(command)} failed: {failure}", logger="current", level=logging.WARNING
            )
            return f"; requeueing slurm job {job} failed ({failure})"
        print_log(f"requeued slurm job {job}", logger="current")
        return f"; slurm job {job} requeued"
