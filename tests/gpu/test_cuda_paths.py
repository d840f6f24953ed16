"""The hams and both heads on CUDA (marker ``gpu``; skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import hamseg  # noqa: F401  (before mmseg)
from hamseg.models import HamHead, HamLightHead
from tests.models.references import perturb_norms

pytestmark = pytest.mark.gpu
NMF = dict(type="NMF", R=8, train_steps=3, eval_steps=3)


def _head(**ham) -> HamHead:
    cfg = dict(NMF, **ham)
    return HamHead(in_channels=16, ham_channels=32, channels=16, num_classes=5, ham_cfg=cfg)


def test_seeded_dictionary_is_drawn_once_on_the_input_device(cuda):
    head = _head(eval_seed=0).to(cuda).eval()
    ham = head.hamburger.ham
    x = [torch.rand(1, 16, 9, 9, device=cuda)]
    with torch.no_grad():
        first = head(x)
        drawn = ham.seeded_dictionary
        assert torch.equal(head(x), first)
    assert ham.seeded_dictionary is drawn and drawn.device == cuda
    generator = torch.Generator(cuda).manual_seed(0)  # a CUDA generator seeded with eval_seed
    expected = F.normalize(torch.rand(1, 32, 8, generator=generator, device=cuda), dim=1)
    torch.testing.assert_close(drawn, expected, rtol=0, atol=0)


def _ham_head() -> tuple[torch.nn.Module, list[torch.Tensor]]:
    head = _head(init="fixed", D=32)  # a buffer: the same dictionary on both devices
    perturb_norms(head)
    return head, [torch.rand(2, 16, 33, 33)]


def _segnext_head() -> tuple[torch.nn.Module, list[torch.Tensor]]:
    head = HamLightHead(
        in_channels=[8, 16],
        in_index=[0, 1],
        channels=16,
        ham_channels=32,
        num_classes=5,
        ham_cfg=dict(NMF, init="fixed", D=32),
        norm_cfg=dict(type="GN", num_groups=8, requires_grad=True),
    )
    return head, [torch.rand(2, 8, 33, 33), torch.rand(2, 16, 17, 17)]


@pytest.mark.parametrize("build", [_ham_head, _segnext_head], ids=["HamHead", "HamLightHead"])
def test_cpu_and_cuda_heads_agree_given_the_same_dictionary(cuda, build, monkeypatch):
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)  # float32 on CUDA too
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    torch.manual_seed(0)
    head, inputs = build()
    head.eval()
    with torch.no_grad():
        on_cpu = head(inputs)
        on_cuda = head.to(cuda)([x.to(cuda) for x in inputs])
    assert on_cuda.device == cuda
    torch.testing.assert_close(on_cuda.cpu(), on_cpu, rtol=1e-3, atol=1e-4)
