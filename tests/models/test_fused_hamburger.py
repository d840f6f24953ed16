"""Inference through the ham's factors (hamseg/models/fused_hamburger.py) equals the module calls.

Without autograd the conv after the ham multiplies the factors, (W D) C; the reference is the
block written with the submodules' own forward calls. The path must not apply where it would
skip a hook or change the arithmetic (training, autocast, a trace).
"""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import pytest
import torch
from torch import nn

import hamseg.models.fused_hamburger as fused
from hamseg.models import Hamburger, LightHamburger
from tests.models.references import perturb_norms, random_bases, reference_block

F64 = torch.float64


def perturbed_block(variant, ham, dtype, c=16, d=12, r=4, **kwargs):
    torch.manual_seed(0)
    cfg = dict(type=ham, R=r, train_steps=3, eval_steps=3, **kwargs)
    block = Hamburger(c, d, ham_cfg=cfg, variant=variant).to(dtype)
    block.fast_path_min_positions = 1  # the path on these small maps too
    perturb_norms(block)
    return block


def after_ham(block):
    return block.cheese if block.variant == "release" else block.upper_bread


CASES = [
    ("paper", "NMF", torch.float32, 1e-5),
    ("release", "NMF", torch.float32, 1e-5),
    ("paper", "CD", F64, 1e-9),
    ("release", "VQ", F64, 1e-9),
]


@pytest.mark.parametrize("variant, ham, dtype, tol", CASES)
@pytest.mark.parametrize("batch", [1, 2])
def test_block_inference_equals_module_calls(variant, ham, dtype, tol, batch):
    block = perturbed_block(variant, ham, dtype).eval()
    x = torch.randn(batch, 16, 7, 9, dtype=dtype)
    bases = random_bases(batch, 12, 4, dtype)
    with torch.no_grad():
        assert fused.applies(block, block.lower_bread(x), after_ham(block))
        expected = reference_block(block, x, bases)
        out = block(x, bases)
    torch.testing.assert_close(out, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("variant", ["paper", "release"])
@pytest.mark.parametrize("S, draws", [(2, 1), (3, 1), (2, 3)])
def test_groups_and_eval_draws_equal_module_calls(variant, S, draws):
    """W X_bar = [W_1 D_1, ..., W_S D_S] [C_1; ...; C_S], and the K draws side by side."""
    block = perturbed_block(variant, "NMF", F64, c=10, S=S, eval_seed=0, eval_draws=draws)
    block.eval()
    x = torch.randn(2, 10, 5, 7, dtype=F64)
    with torch.no_grad():
        expected = reference_block(block, x, None)
        out = block(x)
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("act_cfg", [None, dict(type="GELU")])
def test_release_cheese_activations(act_cfg):
    """The cheese's activation (none, or other than ReLU) runs after the product, as a module."""
    torch.manual_seed(5)
    block = Hamburger(16, 12, ham_cfg=dict(type="NMF", R=4), act_cfg=act_cfg).eval()
    block.fast_path_min_positions = 1
    x = torch.rand(2, 16, 6, 5)
    bases = random_bases(2, 12, 4, torch.float32)
    with torch.no_grad():
        expected = reference_block(block, x, bases)
        out = block(x, bases)
    if act_cfg is None:
        assert (expected < 0).any()  # no ReLU anywhere after the sum
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("norm_cfg", [dict(type="GN", num_groups=4), dict(type="BN")])
def test_light_hamburger_inference_equals_module_calls(norm_cfg):
    torch.manual_seed(7)
    block = LightHamburger(8, dict(type="NMF", R=3, eval_steps=3), norm_cfg).double().eval()
    perturb_norms(block)
    block.fast_path_min_positions = 1
    x = torch.randn(2, 8, 5, 7, dtype=F64)
    bases = random_bases(2, 8, 3, F64)
    with torch.no_grad():
        expected = block.act(x + block.ham_out(block.ham(block.relu_in(block.ham_in(x)), bases)))
        out = block(x, bases)
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)


def test_where_it_does_not_apply_the_module_calls_run():
    block = perturbed_block("paper", "NMF", torch.float32).eval()
    x = torch.randn(1, 16, 6, 6)
    bases = random_bases(1, 12, 4, torch.float32)
    after = block.upper_bread
    with torch.no_grad():
        z = block.lower_bread(x)
        expected = reference_block(block, x, bases)
        assert fused.applies(block, z, after)
        # small maps (the default threshold is 32 x 32 positions): bit-identical module calls
        del block.fast_path_min_positions
        assert not fused.applies(block, z, after) and torch.equal(block(x, bases), expected)
        block.fast_path_min_positions = None  # the switch
        assert not fused.applies(block, z, after)
        block.fast_path_min_positions = 1
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert not fused.applies(block, z, after)
        assert not fused.applies(block, z.half(), after)
        assert not fused.applies(block, z, block.norm)  # no conv after the ham (Table 2)
        block.ham.spatial = False  # channel folding: the factors are not W's to multiply
        assert not fused.applies(block, z, after)
        block.ham.spatial = True
        handle = nn.modules.module.register_module_forward_pre_hook(lambda *a: None)
        assert not fused.applies(block, z, after)  # a global hook fires in every module
        handle.remove()
        fired = []
        for part in (block.ham, block.upper_bread.conv):  # a hook on the ham or the conv fires
            handle = part.register_forward_hook(lambda *a: fired.append(1))
            assert not fused.applies(block, z, after)
            torch.testing.assert_close(block(x, bases), expected, rtol=1e-5, atol=1e-5)
            handle.remove()
        assert fired == [1, 1]
        traced = []
        record = lambda t: traced.append(fused.applies(block, t, after)) or t  # noqa: E731
        torch.jit.trace(record, z, check_trace=False)
        assert traced == [False]
    assert not fused.applies(block, z, after)  # autograd on: training takes the module calls


def test_input_and_running_stats_are_left_alone():
    block = perturbed_block("release", "NMF", torch.float32).eval()
    x = torch.randn(1, 16, 6, 6)
    keep = x.clone()
    stats = [b.clone() for b in block.buffers()]
    with torch.no_grad():
        block(x)
    assert torch.equal(x, keep)
    assert all(torch.equal(a, b) for a, b in zip(stats, block.buffers()))


@pytest.mark.parametrize("ham", ["NMF", "CD"])
@pytest.mark.parametrize("variant", ["paper", "release"])
@pytest.mark.parametrize(
    "switches", [dict(with_ham=False), dict(with_upper_bread=False), dict(with_lower_bread=False)]
)
def test_table2_blocks_equal_their_module_calls_and_leave_the_input_alone(ham, variant, switches):
    """Without the lower bread a CD ham works on Z itself: nothing may be written over it."""
    torch.manual_seed(6)
    block = Hamburger(16, ham_cfg=dict(type=ham, R=4), variant=variant, **switches).eval()
    block.fast_path_min_positions = 1
    perturb_norms(block)
    x = torch.rand(2, 16, 6, 5)
    keep = x.clone()
    bases = random_bases(2, 16, 4, torch.float32)
    with torch.no_grad():
        z = block.lower_bread(x)
        z = block.ham(z, bases) if block.ham is not None else z
        expected = block.act(x + block.norm(block.upper_bread(block.cheese(z))))
        torch.testing.assert_close(block(x, bases), expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(x, keep)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch", [1, 3])
def test_pointwise_conv_is_the_convolution(bias, batch):
    """Outputs and gradients equal ``nn.Conv2d``'s (channels-last input too, and with an
    in-place ReLU after it, as in the lower bread), the state dict is a conv's; switched off,
    and while a graph is recorded, it is the convolution."""
    torch.manual_seed(1)
    conv = nn.Conv2d(6, 4, 1, bias=bias).double()
    pointwise = fused.PointwiseConv(6, 4, 1, bias=bias).double()
    pointwise.load_state_dict(conv.state_dict())
    assert pointwise.state_dict().keys() == conv.state_dict().keys()
    x = torch.randn(batch, 6, 5, 7, dtype=F64)
    cases = [(x, False), (x.contiguous(memory_format=torch.channels_last), False), (x, True)]
    for inp, relu in cases:
        grads = []
        for module in (conv, pointwise):
            xi = inp.clone().requires_grad_(True)
            module.zero_grad()
            out = module(xi).relu_() if relu else module(xi)
            (out * torch.linspace(-1, 1, out.numel(), dtype=F64).view_as(out)).sum().backward()
            grads.append((out, xi.grad, *[p.grad for p in module.parameters()]))
        for a, b in zip(*grads):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    fused.PointwiseConv.enabled = False
    try:
        assert torch.equal(pointwise(x), conv(x))
    finally:
        fused.PointwiseConv.enabled = True
    traced = torch.jit.trace(pointwise, x)
    assert "aten::_convolution" in str(traced.graph) and "bmm" not in str(traced.graph)
    with pytest.raises(ValueError, match="1x1"):
        fused.PointwiseConv(6, 4, 3)


@pytest.mark.parametrize("grad", [True, False])
def test_pointwise_conv_under_autocast_keeps_the_products_dtype(grad):
    """Under CPU autocast (bfloat16) the output has the dtype ``nn.Conv2d``'s has, with its
    bias: the float32 bias does not promote the bfloat16 product (the ham after the lower bread
    then sees what autocast makes of a convolution)."""
    torch.manual_seed(2)
    conv = nn.Conv2d(6, 4, 1)
    pointwise = fused.PointwiseConv(6, 4, 1)
    pointwise.load_state_dict(conv.state_dict())
    x = torch.randn(2, 6, 5, 7)
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.set_grad_enabled(grad):
        expected, out = conv(x), pointwise(x)
    assert out.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expected.float(), rtol=2e-2, atol=2e-2)


def test_is_plain_conv1x1():
    assert fused.is_plain_conv1x1(nn.Conv2d(4, 4, 1))
    for conv in (nn.Conv2d(4, 4, 3), nn.Conv2d(4, 4, 1, stride=2), nn.Conv2d(4, 4, 1, groups=2)):
        assert not fused.is_plain_conv1x1(conv)
