"""Stop a diverged run on every rank (exit code 65) before it saves non-finite weights
(docs/robustness.md, "Divergence")."""

import math
from typing import Any

import torch
from mmengine.hooks import Hook
from mmseg.registry import HOOKS

from .stop import TrainingStopped, agree_max

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
            more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
            shown += f"; non-finite: {', '.join(bad[:3])}{more}"
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
