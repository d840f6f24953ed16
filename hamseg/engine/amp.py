"""``--amp`` without a GPU: mmengine 0.10.7's ``AmpOptimWrapper`` asserts CUDA (or NPU/MLU/MUSA).

:class:`CPUAmpOptimWrapper` runs the forward pass under CPU autocast: bfloat16 without loss
scaling, or float16 with torch's CPU ``GradScaler`` exactly as ``AmpOptimWrapper`` scales on a
GPU (inherited ``backward``/``step``/state dict), so fp16 runs and their skipped steps can be
reproduced on a CPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Optional, Union

import torch
from mmengine.optim import AmpOptimWrapper, OptimWrapper
from mmseg.registry import OPTIM_WRAPPERS

__all__ = ["CPUAmpOptimWrapper"]


@OPTIM_WRAPPERS.register_module()
class CPUAmpOptimWrapper(AmpOptimWrapper):
    """An optimizer wrapper that runs the forward pass under CPU autocast.

    Args:
        dtype: Autocast dtype, 'bfloat16' (default) or 'float16'.
        loss_scale: None: no loss scaling; else as for ``AmpOptimWrapper``: 'dynamic', a float
            (static scale) or a dict of ``torch.amp.GradScaler`` arguments.
        **kwargs: Passed to :class:`mmengine.optim.OptimWrapper`.
    """

    def __init__(
        self,
        dtype: Union[str, torch.dtype] = "bfloat16",
        loss_scale: Optional[Union[str, float, dict]] = None,
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
