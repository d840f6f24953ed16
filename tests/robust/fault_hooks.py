"""Test hooks that inject a fault at a chosen training iteration: a real signal, a NaN loss.

``SignalAtIterHook(at=k, ...)`` acts in ``after_train_iter`` of iteration k (1-based, as in the
log) on rank ``rank``, before :class:`~hamseg.engine.preemption.PreemptionHook` (priority
LOWEST) looks for signals, so the stop happens after iteration k exactly:

* ``mode='self'``: ``os.kill(os.getpid(), sig)``, a real signal through the kernel;
* ``mode='wait'``: print ``SIGNAL ME <pid>``, then wait until the test has sent a signal that
  the PreemptionHook recorded (the test sends it to this process, another rank or the
  launcher).

``SlowSaveHook(seconds)`` sleeps before every checkpoint write (a slow file system).

``PoisonLossHook(at=k, rank=r)`` replaces rank r's logged loss of iteration k by NaN before
:class:`~hamseg.engine.stop.NonFiniteLossHook` (priority 80) reads it: one rank's loss
goes bad while the others' stay finite.

Nothing else in the run is changed.
"""

from __future__ import annotations

import os
import signal
import time

import torch
from mmengine.dist import get_rank
from mmengine.hooks import Hook
from mmseg.registry import HOOKS

from hamseg.engine import PreemptionHook


@HOOKS.register_module()
class SignalAtIterHook(Hook):
    priority = 95  # after CheckpointHook (90), before PreemptionHook (100)

    def __init__(
        self,
        at: int,
        mode: str = "self",
        sig: str = "SIGUSR1",
        rank: int = 0,
        timeout: float = 120.0,
    ) -> None:
        self.at, self.mode, self.rank = at, mode, rank
        self.signum = int(signal.Signals[sig])
        self.timeout = timeout

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if runner.iter + 1 != self.at or get_rank() != self.rank:
            return
        hook = next(h for h in runner.hooks if isinstance(h, PreemptionHook))
        if self.mode == "self":
            os.kill(os.getpid(), self.signum)
        else:
            print(f"SIGNAL ME {os.getpid()}", flush=True)
        deadline = time.monotonic() + self.timeout
        while not hook.received:  # the handler runs between two bytecodes of this loop
            if time.monotonic() > deadline:
                raise RuntimeError(f"no signal arrived within {self.timeout} s")
            time.sleep(0.01)


@HOOKS.register_module()
class PoisonLossHook(Hook):
    priority = 75  # before NonFiniteLossHook (80)

    def __init__(self, at: int, rank: int = 0) -> None:
        self.at, self.rank = at, rank

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if runner.iter + 1 == self.at and get_rank() == self.rank:
            outputs["loss"] = torch.tensor(float("nan"))


@HOOKS.register_module()
class SlowSaveHook(Hook):
    """Sleeps ``seconds`` before each checkpoint is written (a slow file system)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def before_save_checkpoint(self, runner, checkpoint) -> None:
        print(f"SLOW SAVE {self.seconds} s", flush=True)
        time.sleep(self.seconds)
