"""Training and evaluation in the channels_last memory format where it was measured faster: the
recipe's iteration ran 1.2-1.35x faster on an H200 (cuDNN's NHWC kernels), slower on the CPU
(docs/gpu.md)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmseg.registry import HOOKS


@HOOKS.register_module()
class ChannelsLastHook(Hook):
    """Convert the model's 4-d weights to ``torch.channels_last`` before the run if they live on
    one of ``devices`` (the activations follow the weights)."""

    priority = "VERY_HIGH"

    def __init__(self, devices: Sequence[str] = ("cuda",)) -> None:
        self.devices = tuple(devices)

    def before_run(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        param = next(model.parameters(), None)
        if param is not None and param.device.type in self.devices:
            model.to(memory_format=torch.channels_last)  # in place: optimizers keep their tensors
