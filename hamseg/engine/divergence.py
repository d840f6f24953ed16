"""Stop a diverged run before it writes a checkpoint of non-finite weights (exit code 65).

Left alone, mmengine keeps training a run whose loss went NaN and keeps writing NaN checkpoints;
with ``max_keep_ckpts`` they rotate the last good ones away. :class:`NonFiniteLossHook`
(``tools/train.py`` adds it to every config that has none) checks after every iteration, before
``CheckpointHook`` can save it:

* the losses of the iteration (every logged value whose name contains ``loss``);
* the weights after the update (float parameters and buffers; their largest magnitude, one
  fused reduction): a finite loss with an overflowing update leaves non-finite weights too;
* under a loss scaler (fp16 ``AmpOptimWrapper``, or ``CPUAmpOptimWrapper`` with
  ``loss_scale``): a step the scaler skipped (its scale went down, or the loss was non-finite,
  so the gradients were) is not divergence, the weights are untouched, but more than
  ``max_consecutive_skips`` skips in a row are.

All ranks agree (:func:`~hamseg.engine.stop.agree_max`: losses differ per rank) and raise
:class:`TrainingDiverged` together, e.g. ``non-finite loss at iteration 7 (loss=nan,
decode.loss_ce=nan)``; without a loss scaler a non-finite loss is reported as such, even when the
weights are non-finite too. The weights check is the safety net for a loss that is still finite
when the state is not (AdamW steps with a huge learning rate, or activations so large that BN's
running variance overflows while its normalized output, hence the loss, stays finite): ``non-finite
parameters or buffers after iteration 2 (loss=7.854e+14, ...; non-finite:
decode_head.hamburger.cheese.bn.running_var, ...)``, naming the first such tensors. Iterations
count from 1, as in the log lines and ``iter_N.pth``. Raising from ``after_train_iter`` with
priority 80 runs after the logger (60) and the LR scheduler (70) but before ``CheckpointHook``
(90): no checkpoint of this iteration is written, no older one is removed, and the ``after_train``
hooks (where a final save could happen) never run, so ``last_checkpoint`` keeps naming the last
good checkpoint. The process exits with :data:`DIVERGED_EXIT_CODE` (65, ``EX_DATAERR`` of
sysexits.h: resuming the same run reproduces it, so a script must not simply requeue it).
"""

from __future__ import annotations

import math
from typing import Any, Optional

import torch
from mmengine.dist import get_rank, get_world_size
from mmengine.hooks import Hook
from mmengine.optim import OptimWrapperDict
from mmseg.registry import HOOKS

from .stop import TrainingStopped, agree_max

__all__ = ["DIVERGED_EXIT_CODE", "NonFiniteLossHook", "TrainingDiverged"]

#: Exit code of a run stopped because it diverged (sysexits.h EX_DATAERR).
DIVERGED_EXIT_CODE = 65

_OK, _WEIGHTS, _LOSS, _SKIPS = 0, 1, 2, 3  # problem codes; the larger wins when ranks differ


class TrainingDiverged(TrainingStopped):
    """Training stopped on a non-finite loss or weights, before saving them (exit code 65)."""

    label = "error: "


def _loss_scalers(optim_wrapper: Any) -> list:
    """The enabled ``GradScaler``s of an optimizer wrapper (or of each in a wrapper dict)."""
    wrappers = (
        list(optim_wrapper.values())
        if isinstance(optim_wrapper, OptimWrapperDict)
        else [optim_wrapper]
    )
    scalers = [getattr(wrapper, "loss_scaler", None) for wrapper in wrappers]
    return [s for s in scalers if s is not None and s.is_enabled()]


def _non_finite_names(model: torch.nn.Module, shown: int = 3) -> str:
    """The first ``shown`` names of the model's non-finite float parameters and buffers."""
    names = [
        name
        for name, tensor in (*model.named_parameters(), *model.named_buffers())
        if tensor.is_floating_point() and not bool(tensor.detach().isfinite().all())
    ]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


@HOOKS.register_module()
class NonFiniteLossHook(Hook):
    """Raise :class:`TrainingDiverged` on every rank when a loss or the weights become non-finite.

    Args:
        max_consecutive_skips: Under a loss scaler, how many steps in a row it may skip before
            the run counts as diverged (default 20: the dynamic scale then fell by 2**20).
        check_weights: Also check parameters and buffers after each update (default True).
        exit_code: Exit code of the stopped process (default 65).
    """

    priority = 80  # after LoggerHook (60) and ParamSchedulerHook (70), before CheckpointHook (90)

    def __init__(
        self,
        max_consecutive_skips: int = 20,
        check_weights: bool = True,
        exit_code: int = DIVERGED_EXIT_CODE,
    ) -> None:
        self.max_consecutive_skips = int(max_consecutive_skips)
        self.check_weights = check_weights
        self.exit_code = int(exit_code)
        self.consecutive_skips = 0
        self._scales: list[float] = []

    def before_train_iter(self, runner, batch_idx: int, data_batch: Any = None) -> None:
        """Remember the loss scales, to tell a skipped step (the scale goes down) afterwards."""
        self._scales = [scaler.get_scale() for scaler in _loss_scalers(runner.optim_wrapper)]

    def after_train_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs=None):
        """Check this iteration's losses and weights; all ranks stop together if any rank failed."""
        losses = {k: v for k, v in (outputs or {}).items() if "loss" in k}
        values = [torch.as_tensor(v).detach().float().reshape(-1) for v in losses.values()]
        checks = [torch.cat(values).isfinite().all()] if values else [torch.tensor(True)]
        if self.check_weights:
            tensors = [
                t
                for t in (*runner.model.parameters(), *runner.model.buffers())
                if t.is_floating_point()
            ]
            largest = torch.nn.utils.get_total_norm(tensors, norm_type=math.inf)
            checks.append(largest.isfinite().to(checks[0].device))
        flags = torch.stack(checks).tolist()  # one host sync for all checks
        loss_ok, weights_ok = flags[0], flags[1] if self.check_weights else True

        scalers = _loss_scalers(runner.optim_wrapper)
        scales = [scaler.get_scale() for scaler in scalers]
        skipped = bool(scalers) and (
            not loss_ok or any(now < before for now, before in zip(scales, self._scales))
        )
        self.consecutive_skips = self.consecutive_skips + 1 if skipped else 0

        problem = _OK
        if not loss_ok and not scalers:
            problem = _LOSS
        elif self.consecutive_skips > self.max_consecutive_skips:
            problem = _SKIPS
        elif not weights_ok:
            problem = _WEIGHTS
        # one integer per rank: the worst problem, and among the ranks that have it the lowest
        rank, world = get_rank(), get_world_size()
        (code,) = agree_max([problem * (world + 1) + (world - rank) if problem else 0])
        if code == 0:
            return
        kind, lowest = divmod(code, world + 1)
        message = self._message(runner, kind, world - lowest, losses, scales)
        raise TrainingDiverged(message, self.exit_code)

    def _message(self, runner, kind: int, bad_rank: int, losses: dict, scales: list[float]) -> str:
        step = runner.iter + 1
        if bad_rank == get_rank():
            shown = ", ".join(
                f"{k}={float(torch.as_tensor(v).detach().float().mean()):.4g}"
                for k, v in losses.items()
            )
            if kind == _WEIGHTS:
                shown += f"; non-finite: {_non_finite_names(runner.model)}"
        else:
            shown = f"on rank {bad_rank}"
        if kind == _LOSS:
            what = f"non-finite loss at iteration {step} ({shown})"
        elif kind == _SKIPS:
            what = (
                f"non-finite gradients at iteration {step}: the loss scaler skipped "
                f"{self.consecutive_skips} steps in a row (scale {min(scales, default=0):.3g}, "
                f"max_consecutive_skips={self.max_consecutive_skips}; {shown})"
            )
        else:
            what = f"non-finite parameters or buffers after iteration {step} ({shown})"
        latest: Optional[str] = runner.message_hub.get_info("last_ckpt")
        kept = f"the latest checkpoint is {latest}" if latest else "no checkpoint was written"
        return f"{what}; stopped without saving these weights ({kept})"
