"""``tools/train.py --resume --extend-schedule``: mmengine 0.10.7 restores the schedulers, ends
included, from the checkpoint, so a longer schedule would go on at the final learning rate.
:class:`ExtendScheduleHook` rebuilds the config's schedulers at the checkpoint's iteration instead,
as if the run had had them from the start. docs/robustness.md, "What --resume means"."""

from __future__ import annotations

import warnings

from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmseg.registry import HOOKS

from hamseg.utils.errors import UsageError


@HOOKS.register_module()
class ExtendScheduleHook(Hook):
    """On resume: drop the checkpoint's scheduler states, step the config's (iteration-based)
    schedulers from iteration 0 to the resumed one, and log the learning rate it moved."""

    priority = "VERY_HIGH"

    def __init__(self) -> None:
        self.trained_ends: list | None = None

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        self.trained_ends = [s.get("end") for s in checkpoint.pop("param_schedulers", None) or []]

    def before_train(self, runner) -> None:
        if self.trained_ends is None or runner.iter == 0:
            return  # no resume
        if not isinstance(runner.param_schedulers, list):
            raise UsageError("--extend-schedule takes one list of param_scheduler, not a dict")
        before = runner.optim_wrapper.param_groups[0]["lr"]
        for scheduler in runner.param_schedulers:  # back to the values they were built from
            for group, base in zip(scheduler.optimizer.param_groups, scheduler.base_values):
                group[scheduler.param_name] = base
        schedulers = runner.build_param_scheduler(runner.cfg.param_scheduler)
        runner.param_schedulers = schedulers
        with warnings.catch_warnings():  # "scheduler.step() before optimizer.step()": on purpose
            warnings.simplefilter("ignore", UserWarning)
            for _ in range(runner.iter):  # what ParamSchedulerHook did after each iteration
                for scheduler in (s for s in schedulers if not s.by_epoch):
                    scheduler.step()
        after = runner.optim_wrapper.param_groups[0]["lr"]
        print_log(
            f"--extend-schedule: the config's schedulers (ending at {[s.end for s in schedulers]}, "
            f"the checkpoint's at {self.trained_ends}) rebuilt at iteration {runner.iter}: "
            f"lr {before:.4g} -> {after:.4g}",
            "current",
        )
