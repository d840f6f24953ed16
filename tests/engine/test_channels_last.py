"""ChannelsLastHook and the GPU-facing switches, on the CPU: channels_last weights train as NCHW
ones do, ``--amp-dtype bfloat16`` drops the loss scaler on a GPU, PointwiseConv's device list."""

from __future__ import annotations

import torch
from mmengine.config import Config

import hamseg  # noqa: F401  (before mmseg)
from hamseg.cli import enable_amp
from hamseg.engine.channels_last import ChannelsLastHook
from tests.helpers import build_for_training, synthetic_batch

TINY_HAM = "tests/data/tiny_ham.py"


class _Runner:
    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model


def _convs(model: torch.nn.Module) -> list[torch.nn.Conv2d]:
    return [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]


def test_hook_converts_on_its_devices_only_and_training_is_unchanged():
    cpu = torch.device("cpu")
    model, wrapper, _ = build_for_training(TINY_HAM, 33, cpu)
    data = synthetic_batch(2, 33, model.decode_head.num_classes)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    ChannelsLastHook().before_run(_Runner(model))  # default: CUDA only
    assert all(c.weight.is_contiguous() for c in _convs(model))
    torch.manual_seed(1)
    nchw = [float(model.train_step(data, wrapper)["loss"]) for _ in range(2)]

    model.load_state_dict(state)
    wrapper.optimizer.state.clear()
    ChannelsLastHook(devices=["cpu"]).before_run(_Runner(model))
    weights = [c.weight for c in _convs(model) if c.weight.shape[2:] != (1, 1)]
    assert weights and all(w.is_contiguous(memory_format=torch.channels_last) for w in weights)
    torch.manual_seed(1)
    last = [float(model.train_step(data, wrapper)["loss"]) for _ in range(2)]
    torch.testing.assert_close(last, nchw, rtol=1e-4, atol=1e-5)  # the same training, 2 steps


def _cfg() -> Config:
    return Config(dict(optim_wrapper=dict(type="OptimWrapper", optimizer=dict(type="SGD", lr=0.1))))


def test_amp_dtype_bfloat16_on_a_gpu_has_no_loss_scaler(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    cfg = _cfg()
    enable_amp(cfg, "bfloat16")
    wrapper = cfg.optim_wrapper
    assert (wrapper.type, wrapper.dtype, wrapper.loss_scale) == (
        "AmpOptimWrapper",
        "bfloat16",
        dict(enabled=False),
    )
    cfg = _cfg()
    enable_amp(cfg)  # mmseg's --amp: float16 with a dynamic scaler
    assert (cfg.optim_wrapper.type, cfg.optim_wrapper.loss_scale) == ("AmpOptimWrapper", "dynamic")


def test_amp_dtype_on_the_cpu():
    cfg = _cfg()
    enable_amp(cfg, "float16")
    assert (cfg.optim_wrapper.type, cfg.optim_wrapper.dtype) == ("CPUAmpOptimWrapper", "float16")
    assert cfg.optim_wrapper.loss_scale == "dynamic"
    cfg = _cfg()
    enable_amp(cfg, "bfloat16")
    assert (cfg.optim_wrapper.type, cfg.optim_wrapper.dtype) == ("CPUAmpOptimWrapper", "bfloat16")
