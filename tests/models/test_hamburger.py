"""Tests of the Hamburger block (paper Sec. 2.2.1, Eq. 5-6, Tables 2-3; release "V2")."""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hamseg.models import NMF, VQ, Hamburger
from tests.models.references import perturb_norms


def n_params(module):
    return sum(p.numel() for p in module.parameters())


def test_parameters_and_names_of_the_paper_and_release_variants():
    """'paper': W_l (bias), W_u (no bias: a BN follows), the BN: 0.50M in the paper's M = 2^20
    (Table 2; its self-attention row, 4 x 512 x 512, reads 1.00M). 'release': its names."""
    c = 512
    paper = Hamburger(c, variant="paper")
    assert n_params(paper) == (c * c + c) + c * c + 2 * c == 525_824
    assert round(n_params(paper) / 2**20, 2) == 0.50
    assert set(paper.state_dict()) == {
        "lower_bread.0.weight",
        "lower_bread.0.bias",
        "upper_bread.conv.weight",
        *(f"upper_bread.bn.{k}" for k in ("weight", "bias", "running_mean", "running_var")),
        "upper_bread.bn.num_batches_tracked",
    }
    shapes = {k: tuple(v.shape) for k, v in Hamburger(c).state_dict().items()}
    assert shapes == {
        "lower_bread.0.weight": (c, c, 1, 1),
        "lower_bread.0.bias": (c,),
        "cheese.conv.weight": (c, c, 1, 1),
        **{f"cheese.bn.{k}": (c,) for k in ("weight", "bias", "running_mean", "running_var")},
        "cheese.bn.num_batches_tracked": (),
        "upper_bread.weight": (c, c, 1, 1),
    }
    with pytest.raises(ValueError, match="variant"):
        Hamburger(8, variant="V2+")


def test_light_variant_is_mmsegs_block_with_mmsegs_names():
    """SegNeXt's block (mmseg's LightHamHead): Y = ReLU(Z + GN(W_u M(ReLU(W_l Z)))), a ReLU
    before any ham, mmseg's names and init (ConvModule's: zero biases)."""
    torch.manual_seed(0)
    gn = dict(type="GN", num_groups=2, requires_grad=True)
    block = Hamburger(8, ham_cfg=dict(type="CD", R=3), variant="light", norm_cfg=gn).eval()
    assert set(block.state_dict()) == {
        "ham_in.conv.weight",
        "ham_in.conv.bias",
        "ham_out.conv.weight",
        "ham_out.gn.weight",
        "ham_out.gn.bias",
    }
    assert torch.equal(block.ham_in.conv.bias, torch.zeros(8))
    block.ham_out.gn.weight.data.uniform_(0.5, 1.5)
    block.ham_in.conv.bias.data.uniform_(-0.5, 0.5)
    x = torch.randn(2, 8, 5, 7)
    bases = F.normalize(torch.randn(2, 8, 3), dim=1)
    low_rank = block.ham(block.ham_in.conv(x).relu(), bases)
    gn_out = block.ham_out.gn(F.conv2d(low_rank, block.ham_out.conv.weight))
    torch.testing.assert_close(block(x, bases), F.relu(x + gn_out))


def test_relu_before_the_ham_only_for_nmf():
    assert isinstance(Hamburger(8, ham_cfg=dict(type="NMF")).lower_bread[-1], nn.ReLU)
    for ham in ("CD", "VQ"):
        lower = Hamburger(8, ham_cfg=dict(type=ham)).lower_bread
        assert len(lower) == 1 and isinstance(lower[0], nn.Conv2d)


def test_ham_options_reach_the_decomposition():
    # D defaults to latent_channels // S; with channel folding it stays unset (D = H*W).
    assert Hamburger(32, ham_cfg=dict(type="VQ", S=2)).ham.D == 16
    assert isinstance(Hamburger(32, ham_cfg=dict(type="VQ", S=2)).ham, VQ)
    assert Hamburger(32, ham_cfg=dict(type="NMF", spatial=False)).ham.D is None
    assert isinstance(Hamburger(8).ham, NMF)


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


# Table 2: the block without one of its parts
PARTS = dict(with_lower_bread=True, with_ham=True, with_upper_bread=True)
#: Table 2's rows of the 'paper' block: the switches, and the parameters in closed form for
#: d = d_z = c: W_l (c x c, bias), W_u (c x c, no bias: a BN follows), the BN (2 c).
TABLE2 = {
    "basic": {},
    "- ham": dict(with_ham=False),
    "- upper bread": dict(with_upper_bread=False),
    "- lower bread": dict(with_lower_bread=False),
    "only ham": dict(with_lower_bread=False, with_upper_bread=False),
}


def bn_eval(norm, x):
    return F.batch_norm(x, norm.running_mean, norm.running_var, norm.weight, norm.bias, False)


def conv(x, conv_module):
    return F.conv2d(x, conv_module.weight, conv_module.bias)


@pytest.mark.parametrize("ham", ["NMF", "CD"])
@pytest.mark.parametrize("row", TABLE2)
def test_paper_switches_compute_their_closed_form(ham, row):
    """Eq. 6 with a part removed: Y = Z + BN(W_u M(W_l Z)), W_l, M or W_u the identity; the
    ReLU in front of NMF stays (non-negative input), and Z itself is never overwritten."""
    torch.manual_seed(1)
    switches = TABLE2[row]
    cfg = dict(type=ham, R=3, train_steps=3, eval_steps=3)
    block = Hamburger(8, ham_cfg=cfg, variant="paper", **switches).eval()
    perturb_norms(block)
    x = torch.randn(2, 8, 5, 7, dtype=torch.float64)  # negative entries: the ReLU matters
    block.double()
    keep = x.clone()
    bases = F.normalize(torch.rand(2, 8, 3, dtype=torch.float64), dim=1)
    parts = dict(PARTS, **switches)
    z = conv(x, block.lower_bread[0]) if parts["with_lower_bread"] else x
    z = z.relu() if ham == "NMF" else z
    if parts["with_ham"]:
        z = block.ham(z, bases)
    if parts["with_upper_bread"]:
        expected = x + bn_eval(block.upper_bread.bn, conv(z, block.upper_bread.conv))
    else:
        expected = x + bn_eval(block.norm, z)
    with torch.no_grad():
        out = block(x, bases)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    assert torch.equal(x, keep)
    assert (block.ham is None) == (not parts["with_ham"])


def test_no_ham_is_the_breads_around_the_identity():
    """ "- ham" with the weights of a full block: the full block with M replaced by z -> z."""
    torch.manual_seed(2)
    full = Hamburger(8, ham_cfg=dict(type="NMF", R=3), variant="paper").eval()
    perturb_norms(full)
    no_ham = Hamburger(8, ham_cfg=dict(type="NMF", R=3), variant="paper", with_ham=False).eval()
    no_ham.load_state_dict(full.state_dict())
    x = torch.randn(1, 8, 6, 5)
    with torch.no_grad():
        expected = x + full.upper_bread(full.lower_bread(x))
        out, with_ham = no_ham(x), full(x)
    torch.testing.assert_close(out, expected)
    assert not torch.allclose(out, with_ham, atol=1e-3)  # the switch changes the output


@pytest.mark.parametrize("switches", list(TABLE2.values())[:4])
def test_release_switches_compute_their_closed_form(switches):
    """The release's block, Y = ReLU(Z + W_u cheese(M(W_l Z))), and with one part removed."""
    torch.manual_seed(3)
    block = Hamburger(8, ham_cfg=dict(type="NMF", R=3), **switches).eval()
    perturb_norms(block)
    x = torch.randn(2, 8, 5, 7)
    bases = F.normalize(torch.rand(2, 8, 3), dim=1)
    parts = dict(PARTS, **switches)
    z = (conv(x, block.lower_bread[0]) if parts["with_lower_bread"] else x).relu()
    z = block.ham(z, bases) if parts["with_ham"] else z
    z = bn_eval(block.cheese.bn, F.conv2d(z, block.cheese.conv.weight)).relu()
    z = F.conv2d(z, block.upper_bread.weight) if parts["with_upper_bread"] else z
    with torch.no_grad():
        torch.testing.assert_close(block(x, bases), (x + z).relu())


def test_switch_state_dicts():
    def names(**switches):
        return set(Hamburger(8, variant="paper", **switches).state_dict())

    norm = {f"norm.{k}" for k in ("weight", "bias", "running_mean", "running_var")}
    norm.add("norm.num_batches_tracked")
    lower = {"lower_bread.0.weight", "lower_bread.0.bias"}
    assert names(with_ham=False) == names()
    assert names(with_upper_bread=False) == lower | norm
    assert names(with_lower_bread=False) == names() - lower
    assert names(with_lower_bread=False, with_upper_bread=False) == norm
    # no norm configured: nothing left to learn in "only ham"
    bare = dict(norm_cfg=None, with_lower_bread=False, with_upper_bread=False)
    only_ham = Hamburger(8, variant="paper", **bare)
    assert n_params(only_ham) == 0


def test_switches_train():
    for switches in [dict(with_ham=False), dict(with_lower_bread=False, with_upper_bread=False)]:
        block = Hamburger(8, ham_cfg=dict(type="NMF", R=3), variant="paper", **switches)
        x = torch.rand(2, 8, 5, 7, requires_grad=True)
        block(x).square().mean().backward()
        assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in block.parameters())
    # init as the release: the standalone BN of "- upper bread" starts at weight 1, bias 0
    norm = Hamburger(8, variant="paper", with_upper_bread=False).norm
    assert torch.equal(norm.weight, torch.ones(8)) and torch.equal(norm.bias, torch.zeros(8))
