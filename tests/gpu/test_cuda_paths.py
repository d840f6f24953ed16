"""The CUDA paths of the hams, the Hamburger and HamHead (marker ``gpu``; skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import hamseg  # noqa: F401  (before mmseg)
from hamseg.models import Hamburger, HamHead, HamLightHead, cuda_graphs
from tests.models.references import perturb_norms, random_bases

pytestmark = pytest.mark.gpu

HAMS = [
    dict(type="NMF", R=8, train_steps=3, eval_steps=3),
    dict(type="CD", R=8, train_steps=3, eval_steps=3),
    dict(type="VQ", R=8, train_steps=3, eval_steps=3),
]


@pytest.mark.parametrize("variant", ["paper", "release"])
@pytest.mark.parametrize("ham_cfg", HAMS, ids=lambda c: c["type"])
def test_fused_path_equals_module_path_on_cuda(cuda, variant, ham_cfg, monkeypatch):
    # cuDNN convolutions run in TF32 by default (the module path), the fused path's products in
    # float32: measured on an H100, 2.6e-3 apart with TF32; compared here in full float32
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    torch.manual_seed(0)
    block = Hamburger(32, ham_cfg=ham_cfg, variant=variant).to(cuda).eval()
    block.fast_path_devices = ("cuda",)  # shipped for the CPU only; the path itself must hold
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


def _dictionaries(ham) -> list[torch.Tensor]:
    """Spy on ``ham``: the initial dictionary (B*S, D, R) each call starts from, as drawn (a
    copy: the iterations update it in place)."""
    seen = []
    original = ham._initial_bases

    def spy(*args, **kwargs):
        dictionary = original(*args, **kwargs)
        seen.append(dictionary.detach().clone())
        return dictionary

    ham._initial_bases = spy
    return seen


def _fixed(**kwargs) -> dict:
    """A ham whose dictionary is a buffer (``init='fixed'``): moved with the module, so CPU and
    CUDA start from the same one (a seeded draw differs between CPU and CUDA generators)."""
    return dict(type="NMF", R=8, train_steps=3, eval_steps=3, init="fixed", **kwargs)


def _ham_head() -> tuple[torch.nn.Module, list[torch.Tensor]]:
    head = HamHead(
        in_channels=16,
        ham_channels=32,
        channels=16,
        num_classes=5,
        ham_cfg=_fixed(),
        norm_cfg=dict(type="BN"),
    )
    perturb_norms(head)
    return head, [torch.rand(2, 16, 33, 33)]  # 1089 positions: the fused path applies


def _segnext_head() -> tuple[torch.nn.Module, list[torch.Tensor]]:
    head = HamLightHead(
        in_channels=[8, 16],
        in_index=[0, 1],
        channels=16,
        ham_channels=32,
        num_classes=5,
        ham_cfg=_fixed(),
        norm_cfg=dict(type="GN", num_groups=8, requires_grad=True),
    )
    return head, [torch.rand(2, 8, 33, 33), torch.rand(2, 16, 17, 17)]


@pytest.fixture
def no_tf32(monkeypatch):
    """float32 arithmetic on CUDA too: no TF32 in cuDNN's convolutions or cuBLAS's matmuls."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(precision)


@pytest.fixture
def eager_hams(monkeypatch):
    """The hams' eager path (the spies below count its calls; a CUDA graph replays without)."""
    monkeypatch.setattr(cuda_graphs, "enabled", False)


@pytest.mark.usefixtures("no_tf32", "eager_hams")
@pytest.mark.parametrize("build", [_ham_head, _segnext_head], ids=["HamHead", "HamLightHead"])
def test_cpu_and_cuda_heads_agree_given_the_same_dictionary(cuda, build):
    torch.manual_seed(0)
    head, inputs = build()
    head.eval()
    seen = _dictionaries(head.hamburger.ham)
    with torch.no_grad():
        on_cpu = head(inputs)
        on_cuda = head.to(cuda)([x.to(cuda) for x in inputs])
    (cpu_dict, cuda_dict) = seen
    assert cpu_dict.device.type == "cpu" and cuda_dict.device == cuda
    assert torch.equal(cuda_dict.cpu(), cpu_dict)  # the same dictionary on both devices
    assert on_cuda.device == cuda and on_cuda.shape == on_cpu.shape
    torch.testing.assert_close(on_cuda.cpu(), on_cpu, rtol=1e-3, atol=1e-4)


@pytest.mark.usefixtures("eager_hams")
def test_seeded_dictionary_is_drawn_on_the_input_device(cuda):
    head = _head(eval_seed=0).to(cuda).eval()
    ham = head.hamburger.ham
    x = [torch.rand(1, 16, 9, 9, device=cuda)]
    with torch.no_grad():
        first = head(x)
        drawn = ham.seeded_dictionary  # the seeded (S, D, K*R) draws the ham starts from
        assert torch.equal(head(x), first)
    assert ham.seeded_dictionary is drawn  # drawn once
    assert drawn.device == cuda and drawn.shape == (1, 32, 8)
    generator = torch.Generator(cuda).manual_seed(0)  # a CUDA generator, seeded with eval_seed
    expected = F.normalize(torch.rand(1, 32, 8, generator=generator, device=cuda), dim=1)
    torch.testing.assert_close(drawn, expected, rtol=0, atol=0)
