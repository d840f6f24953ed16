"""The hams' inference replayed as CUDA graphs, and channels_last training (marker ``gpu``)."""

from __future__ import annotations

import pytest
import torch
from mmseg.registry import MODELS

import hamseg  # noqa: F401  (before mmseg)
from hamseg.engine import ChannelsLastHook
from hamseg.models import Hamburger, HamHead, cuda_graphs
from tools.lab.benchmark.models import build_for_training, resolve, synthetic_batch

pytestmark = pytest.mark.gpu


def _eager(monkeypatch, module, *args):
    """``module(*args)`` with the hams' eager path."""
    monkeypatch.setattr(cuda_graphs, "enabled", False)
    try:
        return module(*args)
    finally:
        monkeypatch.setattr(cuda_graphs, "enabled", True)


@pytest.mark.parametrize("draws", [1, 12])
@pytest.mark.parametrize("kind", ["NMF", "VQ"])
@pytest.mark.parametrize("shape", [(1, 32, 7, 9), (2, 32, 33, 31)])
def test_seeded_ham_graph_equals_eager(cuda, monkeypatch, kind, draws, shape):
    torch.manual_seed(0)
    ham = MODELS.build(dict(type=kind, R=8, eval_seed=0, eval_draws=draws)).to(cuda).eval()
    x = torch.rand(shape, device=cuda)
    with torch.no_grad():
        eager = _eager(monkeypatch, ham, x)
        graphed = [ham(x) for _ in range(3)]  # capture, then replays
        other = ham(torch.rand(shape, device=cuda))  # a new input through the same graph
        again = ham(x)
    for y in graphed + [again]:
        torch.testing.assert_close(y, eager, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(other, eager)  # the replay read the new input
    torch.testing.assert_close(graphed[0], eager, rtol=1e-5, atol=1e-6)  # not overwritten


def test_random_ham_graph_draws_a_new_dictionary_per_call(cuda):
    torch.manual_seed(0)
    ham = MODELS.build(dict(type="NMF", R=8)).to(cuda).eval()  # the paper's protocol
    x = torch.rand(1, 32, 17, 17, device=cuda)
    with torch.no_grad():
        outputs = [ham(x) for _ in range(6)]  # 3 through the capture, 3 replays
    for a, b in zip(outputs[2:], outputs[3:]):
        assert not torch.equal(a, b)
    spread = torch.stack(outputs).std(0).mean() / outputs[0].abs().mean()
    assert 1e-4 < float(spread) < 1.0  # different draws of one decomposition, not noise


def test_cd_and_training_run_eagerly(cuda, monkeypatch):
    torch.manual_seed(0)
    cd = MODELS.build(dict(type="CD", R=8, eval_seed=0)).to(cuda).eval()
    x = torch.rand(2, 32, 9, 11, device=cuda)
    with torch.no_grad():
        torch.testing.assert_close(cd(x), _eager(monkeypatch, cd, x))
    nmf = MODELS.build(dict(type="NMF", R=8)).to(cuda).train()
    y = nmf(x.requires_grad_())
    y.sum().backward()  # autograd through the eager path
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_head_logits_with_graphs_equal_eager(cuda, monkeypatch):
    torch.manual_seed(0)
    cfg = dict(type="NMF", R=8, eval_seed=0, eval_draws=12)
    head = HamHead(in_channels=16, ham_channels=32, channels=16, num_classes=5, ham_cfg=cfg)
    head = head.to(cuda).eval()
    for size in (33, 65, 33):
        x = [torch.rand(1, 16, size, size + 2, device=cuda)]
        with torch.no_grad():
            torch.testing.assert_close(head(x), _eager(monkeypatch, head, x))


def test_hamburger_block_on_cuda_takes_cudnn_convs_and_the_module_path(cuda):
    block = Hamburger(32, ham_cfg=dict(type="NMF", R=8, eval_seed=0)).to(cuda).eval()
    with torch.no_grad(), torch.profiler.profile() as prof:
        block(torch.rand(1, 32, 40, 40, device=cuda))
    ops = {e.key for e in prof.key_averages()}
    assert "aten::cudnn_convolution" in ops  # PointwiseConv's products are for the CPU


class _Runner:
    def __init__(self, model):
        self.model = model


def test_channels_last_training_matches_nchw(cuda):
    model, wrapper, _ = build_for_training(resolve("tests/data/tiny_ham.py"), 65, cuda)
    data = synthetic_batch(2, 65, model.decode_head.num_classes)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(1)
    nchw = float(model.train_step(data, wrapper)["loss"])
    model.load_state_dict(state)
    ChannelsLastHook().before_run(_Runner(model))
    conv = next(m for m in model.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    torch.manual_seed(1)
    last = float(model.train_step(data, wrapper)["loss"])
    assert abs(last - nchw) < 1e-3 * abs(nchw)  # TF32 / cuDNN algorithms differ per layout
