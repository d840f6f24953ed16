"""Tests of the Hamburger block (paper Sec. 2.2.1, Eq. 5-6, Tables 2-3; release "V2")."""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import math

import pytest
import torch
import torch.nn.functional as F
from mmcv.cnn import ConvModule
from torch import nn

from hamseg.models import CD, NMF, VQ, Hamburger


def n_params(module):
    return sum(p.numel() for p in module.parameters())


def test_paper_variant_adds_0_50M_parameters():
    c = d = 512
    block = Hamburger(c, d, variant="paper")
    # lower bread W_l (conv with bias) + upper bread W_u (conv, no bias: a norm follows) + BN.
    expected = (c * d + d) + d * c + 2 * c
    assert n_params(block) == expected == 525_824
    # The paper's "M" is 2**20: its self-attention row in Table 3 (four 512 x 512 projections,
    # 4 * 512 * 512 = 1,048,576 parameters) reads 1.00M. With 1e6 Hamburger would be 0.53M.
    assert round(4 * 512 * 512 / 2**20, 2) == 1.00
    assert round(n_params(block) / 2**20, 2) == 0.50


def test_release_variant_parameters_and_names():
    c = 512
    block = Hamburger(c)
    expected = (c * c + c) + (c * c + 2 * c) + c * c  # lower (bias), cheese conv + BN, upper
    assert n_params(block) == expected
    shapes = {k: tuple(v.shape) for k, v in block.state_dict().items()}
    assert shapes == {
        "lower_bread.0.weight": (c, c, 1, 1),
        "lower_bread.0.bias": (c,),
        "cheese.conv.weight": (c, c, 1, 1),
        "cheese.bn.weight": (c,),
        "cheese.bn.bias": (c,),
        "cheese.bn.running_mean": (c,),
        "cheese.bn.running_var": (c,),
        "cheese.bn.num_batches_tracked": (),
        "upper_bread.weight": (c, c, 1, 1),
    }


def test_paper_variant_names():
    keys = set(Hamburger(16, variant="paper").state_dict())
    assert keys == {
        "lower_bread.0.weight",
        "lower_bread.0.bias",
        "upper_bread.conv.weight",
        "upper_bread.bn.weight",
        "upper_bread.bn.bias",
        "upper_bread.bn.running_mean",
        "upper_bread.bn.running_var",
        "upper_bread.bn.num_batches_tracked",
    }


def perturb_norms(block):
    for m in block.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)


@pytest.mark.parametrize("ham", ["NMF", "CD"])
def test_paper_forward_is_eq6(ham):
    torch.manual_seed(0)
    block = Hamburger(8, 6, ham_cfg=dict(type=ham, R=3), variant="paper").eval()
    perturb_norms(block)
    x = torch.randn(2, 8, 5, 7)
    bases = F.normalize(torch.rand(2, 6, 3), dim=1)
    lower = block.lower_bread[0](x)
    if ham == "NMF":
        lower = lower.relu()
    low_rank = block.ham(lower, bases)
    upper = block.upper_bread  # conv + BN, no activation
    expected = x + upper.bn(upper.conv(low_rank))  # Y = Z + BN(H(Z)), no final ReLU
    torch.testing.assert_close(block(x, bases), expected)
    assert (block(x, bases) < 0).any()  # no ReLU at the end


def test_release_forward_is_v2():
    torch.manual_seed(0)
    block = Hamburger(8, 6, ham_cfg=dict(type="NMF", R=3)).eval()
    perturb_norms(block)
    x = torch.randn(2, 8, 5, 7)
    bases = F.normalize(torch.rand(2, 6, 3), dim=1)
    low_rank = block.ham(block.lower_bread[0](x).relu(), bases)
    cheese = block.cheese.bn(block.cheese.conv(low_rank)).relu()
    expected = F.relu(x + F.conv2d(cheese, block.upper_bread.weight))
    torch.testing.assert_close(block(x, bases), expected)


def test_relu_before_the_ham_only_for_nmf():
    assert isinstance(Hamburger(8, ham_cfg=dict(type="NMF")).lower_bread[-1], nn.ReLU)
    for ham in ("CD", "VQ"):
        lower = Hamburger(8, ham_cfg=dict(type=ham)).lower_bread
        assert len(lower) == 1 and isinstance(lower[0], nn.Conv2d)


def test_ham_options_reach_the_decomposition():
    block = Hamburger(
        32,
        16,
        ham_cfg=dict(type="CD", S=4, R=5, train_steps=2, eval_steps=3, inv_t=10, beta=0.05),
        variant="paper",
    )
    ham = block.ham
    assert isinstance(ham, CD)
    assert (ham.S, ham.D, ham.R, ham.train_steps, ham.eval_steps) == (4, 4, 5, 2, 3)
    assert (ham.inv_t, ham.beta) == (10.0, 0.05)
    # D defaults to latent_channels // S; with channel folding it stays unset (D = H*W).
    assert Hamburger(32, ham_cfg=dict(type="VQ", S=2)).ham.D == 16
    assert isinstance(Hamburger(32, ham_cfg=dict(type="VQ", S=2)).ham, VQ)
    assert Hamburger(32, ham_cfg=dict(type="NMF", spatial=False)).ham.D is None
    assert isinstance(Hamburger(8).ham, NMF)


def test_norm_and_act_follow_the_configs():
    block = Hamburger(8, norm_cfg=dict(type="GN", num_groups=2), act_cfg=dict(type="GELU"))
    assert isinstance(block.cheese.gn, nn.GroupNorm)
    assert isinstance(block.cheese.activate, nn.GELU) and isinstance(block.act, nn.GELU)
    paper = Hamburger(8, variant="paper", norm_cfg=dict(type="GN", num_groups=2))
    assert isinstance(paper.upper_bread, ConvModule) and isinstance(
        paper.upper_bread.gn, nn.GroupNorm
    )
    assert not paper.upper_bread.with_activation


def test_release_init():
    torch.manual_seed(0)
    block = Hamburger(512, 256, variant="release")
    for conv, out_c in [
        (block.lower_bread[0], 256),
        (block.cheese.conv, 256),
        (block.upper_bread, 512),
    ]:
        std = math.sqrt(2.0 / (1 * 1 * out_c))
        assert abs(conv.weight.std().item() / std - 1) < 0.03
        assert abs(conv.weight.mean().item()) < 0.01 * std
    assert torch.equal(block.cheese.bn.weight, torch.ones(256))
    assert torch.equal(block.cheese.bn.bias, torch.zeros(256))


@pytest.mark.parametrize("variant", ["paper", "release"])
@pytest.mark.parametrize("shape", [(2, 16, 1, 1), (1, 16, 15, 17), (2, 16, 4, 3)])
def test_block_keeps_shape_and_backpropagates(variant, shape):
    block = Hamburger(16, 8, ham_cfg=dict(type="NMF", S=2, R=3), variant=variant)
    x = torch.randn(*shape, requires_grad=True)
    out = block(x)
    assert out.shape == x.shape
    out.square().mean().backward()
    assert block.lower_bread[0].weight.grad.abs().sum() > 0
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_block_under_bf16_autocast():
    block = Hamburger(16, ham_cfg=dict(type="NMF", R=4))
    x = torch.rand(1, 16, 7, 9) * 1e4
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = block(x)
    assert torch.isfinite(out).all()


def test_unknown_variant():
    with pytest.raises(ValueError, match="variant"):
        Hamburger(8, variant="V2+")
