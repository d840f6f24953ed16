"""The CUDA paths of the hams, the Hamburger and HamHead (marker ``gpu``; skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch

import hamseg  # noqa: F401  (before mmseg)
from hamseg.models import Hamburger, HamHead
from tests.models.references import random_bases

pytestmark = pytest.mark.gpu

HAMS = [
    dict(type="NMF", R=8, train_steps=3, eval_steps=3),
    dict(type="CD", R=8, train_steps=3, eval_steps=3),
    dict(type="VQ", R=8, train_steps=3, eval_steps=3),
]


@pytest.mark.parametrize("variant", ["paper", "release"])
@pytest.mark.parametrize("ham_cfg", HAMS, ids=lambda c: c["type"])
def test_fused_path_equals_module_path_on_cuda(cuda, variant, ham_cfg):
    torch.manual_seed(0)
    block = Hamburger(32, ham_cfg=ham_cfg, variant=variant).to(cuda).eval()
    x = torch.rand(2, 32, 33, 33, device=cuda)  # 1089 positions: the fused path applies
    bases = random_bases(2, 32, 8, torch.float32).to(cuda)
    with torch.no_grad():
        fused = block(x, bases)
        block.fast_path_min_positions = 10**9
        plain = block(x, bases)
    torch.testing.assert_close(fused, plain, rtol=1e-4, atol=1e-5)


def _head(**ham) -> HamHead:
    cfg = dict(type="NMF", R=8, train_steps=3, eval_steps=3, **ham)
    return HamHead(in_channels=16, ham_channels=32, channels=16, num_classes=5, ham_cfg=cfg)


def test_seeded_evaluation_is_identical_across_calls_on_cuda(cuda):
    torch.manual_seed(0)
    head = _head(eval_seed=0).to(cuda).eval()
    x = [torch.rand(2, 16, 35, 35, device=cuda)]
    with torch.no_grad():
        assert torch.equal(head(x), head(x))


def test_cpu_and_cuda_agree_given_the_same_dictionary(cuda):
    torch.manual_seed(0)
    block = Hamburger(32, ham_cfg=HAMS[0]).eval()
    x = torch.rand(2, 32, 33, 33)
    bases = random_bases(2, 32, 8, torch.float32)
    with torch.no_grad():
        on_cpu = block(x, bases)
        on_cuda = block.to(cuda)(x.to(cuda), bases.to(cuda)).cpu()
    torch.testing.assert_close(on_cuda, on_cpu, rtol=1e-3, atol=1e-4)


def test_seeded_dictionary_is_drawn_on_the_input_device(cuda):
    head = _head(eval_seed=0).to(cuda).eval()
    seen = []
    ham = head.hamburger.ham
    original = ham._solve

    def spy(X, batch, bases):
        seen.append(X.device)
        return original(X, batch, bases)

    ham._solve = spy
    with torch.no_grad():
        head([torch.rand(1, 16, 9, 9, device=cuda)])
    assert seen == [cuda]
