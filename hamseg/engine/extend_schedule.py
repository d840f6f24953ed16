"""Resume with a longer (or shorter) schedule than the checkpoint's: mmengine 0.10.7 restores the
schedulers, ends included, from the checkpoint, so the extra iterations would run at the final
learning rate. :class:`ExtendScheduleHook` (``tools/train.py --resume --extend-schedule``)
keeps the checkpoint's schedulers out and rebuilds the config's at the checkpoint's iteration,
as if the run had had the config's schedule from the start. docs/robustness.md, "Before the
first iteration"."""

from __future__ import annotations

import warnings

from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmseg.registry import HOOKS


@HOOKS.register_module()
class ExtendScheduleHook(Hook):
    """On resume: ignore the checkpoint's scheduler states and step the config's schedulers
    (iteration-based) from iteration 0 to the resumed one; log the learning rate it moved."""

    priority = "VERY_HIGH"

    def __init__(self) -> None:
        self.trained_ends: list | None = None

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        states = checkpoint.pop("param_schedulers", None) or []
        self.trained_ends = [state.get("end") for state in states]

    def before_train(self, runner) -> None:
        schedulers = runner.param_schedulers
        if self.trained_ends is None or runner.iter == 0 or not isinstance(schedulers, list):
            return  # no resume (or one optimizer's dict of schedulers: not handled)
        groups = runner.optim_wrapper.param_groups
        before = groups[0]["lr"]
        for scheduler in schedulers:  # back to the values they were built from
            for group, base in zip(scheduler.optimizer.param_groups, scheduler.base_values):
                group[scheduler.param_name] = base
        runner.param_schedulers = schedulers = runner.build_param_scheduler(
            runner.cfg.param_scheduler
        )
        stepped = [s for s in schedulers if not s.by_epoch]
        with warnings.catch_warnings():  # "scheduler.step() before optimizer.step()": on purpose
            warnings.simplefilter("ignore", UserWarning)
            for _ in range(runner.iter):  # what ParamSchedulerHook did after each iteration
                for scheduler in stepped:
                    scheduler.step()
        ends = [s.end for s in schedulers]
        print_log(
            f"--extend-schedule: the config's schedulers (ending at {ends}, the checkpoint's at "
            f"{self.trained_ends}) rebuilt at iteration {runner.iter}: lr {before:.4g} -> "
            f"{groups[0]['lr']:.4g}",
            "current",
        )
