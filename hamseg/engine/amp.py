"""``--amp`` without a GPU, where mmengine 0.10.7's ``AmpOptimWrapper`` asserts CUDA: bfloat16
autocast, or float16 with torch's CPU ``GradScaler`` as ``AmpOptimWrapper`` scales on a GPU (fp16
runs and their skipped steps reproduce on a CPU). docs/robustness.md, "Mixed precision"."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from mmengine.optim import AmpOptimWrapper, OptimWrapper
from mmseg.registry import OPTIM_WRAPPERS


@OPTIM_WRAPPERS.register_module()
class CPUAmpOptimWrapper(AmpOptimWrapper):
    """An optimizer wrapper that runs the forward pass under CPU autocast.

    Args:
        dtype: Autocast dtype, 'bfloat16' or 'float16'.
        loss_scale: None: no loss scaling; else as for ``AmpOptimWrapper``: 'dynamic', a float
            (static scale) or a dict of ``torch.amp.GradScaler`` arguments.
        **kwargs: Passed to :class:`mmengine.optim.OptimWrapper`.
    """

    def __init__(
        self,
        dtype: str | torch.dtype = "bfloat16",
        loss_scale: str | float | dict | None = None,
        **kwargs,
    ) -> None:
        OptimWrapper.__init__(self, **kwargs)  # AmpOptimWrapper.__init__ insists on a GPU
        self.cast_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        self._scale_update_param = loss_scale if isinstance(loss_scale, float) else None
        if loss_scale is None:
            scaler_args = dict(enabled=False)  # pass-through
        elif loss_scale == "dynamic":
            scaler_args = {}
        elif isinstance(loss_scale, (float, dict)):
            scaler_args = (
                loss_scale if isinstance(loss_scale, dict) else dict(init_scale=loss_scale)
            )
        else:
            raise TypeError(f"loss_scale must be None, 'dynamic', a float or a dict: {loss_scale}")
        self.loss_scaler = torch.amp.GradScaler("cpu", **scaler_args)

    @contextmanager
    def optim_context(self, model: torch.nn.Module) -> Iterator[None]:
        """Gradient-accumulation context of ``OptimWrapper`` plus CPU autocast."""
        with OptimWrapper.optim_context(self, model), torch.autocast("cpu", dtype=self.cast_dtype):
            yield
