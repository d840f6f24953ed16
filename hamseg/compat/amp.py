"""``--amp`` on machines without a GPU.

mmengine's ``AmpOptimWrapper`` asserts that CUDA (or NPU/MLU/MUSA) is present. On CPU,
``tools/train.py --amp`` uses :class:`CPUAmpOptimWrapper` instead: bfloat16 autocast around the
forward pass, no loss scaling (bfloat16 has float32's exponent range).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from mmengine.optim import OptimWrapper
from mmseg.registry import OPTIM_WRAPPERS

__all__ = ["CPUAmpOptimWrapper"]


@OPTIM_WRAPPERS.register_module()
class CPUAmpOptimWrapper(OptimWrapper):
    """An optimizer wrapper that runs the forward pass under CPU autocast.

    Args:
        dtype: Autocast dtype, 'bfloat16' (default) or 'float16'.
        **kwargs: Passed to :class:`mmengine.optim.OptimWrapper`.
    """

    def __init__(self, dtype: str | torch.dtype = "bfloat16", **kwargs) -> None:
        super().__init__(**kwargs)
        self.cast_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype

    @contextmanager
    def optim_context(self, model: torch.nn.Module) -> Iterator[None]:
        """Gradient-accumulation context of the base class plus CPU autocast."""
        with super().optim_context(model), torch.autocast("cpu", dtype=self.cast_dtype):
            yield
