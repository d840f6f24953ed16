"""``--amp`` on machines without a GPU.

mmengine's ``AmpOptimWrapper`` asserts that CUDA (or NPU/MLU/MUSA) is present. On CPU,
``tools/train.py --amp`` uses :class:`CPUAmpOptimWrapper` instead: bfloat16 autocast around the
forward pass, no loss scaling (bfloat16 has float32's exponent range). With ``dtype='float16'``
and a ``loss_scale`` it scales the loss with torch's CPU ``GradScaler`` exactly as
``AmpOptimWrapper`` does on a GPU (same ``backward``/``step``/state dict, inherited), so fp16
runs, including the loss scaler's skipped steps, can be reproduced on a CPU.
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
        loss_scale: None (default): no loss scaling. Otherwise as for ``AmpOptimWrapper``:
            'dynamic', a float (static scale) or a dict of ``torch.amp.GradScaler`` arguments.
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
        self._scale_update_param = None
        if loss_scale is None:
            self.loss_scaler = torch.amp.GradScaler("cpu", enabled=False)  # pass-through
        elif loss_scale == "dynamic":
            self.loss_scaler = torch.amp.GradScaler("cpu")
        elif isinstance(loss_scale, float):
            self._scale_update_param = loss_scale
            self.loss_scaler = torch.amp.GradScaler("cpu", init_scale=loss_scale)
        elif isinstance(loss_scale, dict):
            self.loss_scaler = torch.amp.GradScaler("cpu", **loss_scale)
        else:
            raise TypeError(f"loss_scale must be None, 'dynamic', a float or a dict: {loss_scale}")

    @contextmanager
    def optim_context(self, model: torch.nn.Module) -> Iterator[None]:
        """Gradient-accumulation context of ``OptimWrapper`` plus CPU autocast."""
        with OptimWrapper.optim_context(self, model), torch.autocast("cpu", dtype=self.cast_dtype):
            yield
