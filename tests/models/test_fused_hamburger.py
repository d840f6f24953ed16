"""The fused inference path of the Hamburger equals the plain module calls.

:mod:`hamseg.models.fused_hamburger`: breads as matrix products with an eval BatchNorm folded
in, in-place skip and ReLU, the reconstruction written over the ham's input without autograd,
and (W D) C instead of W (D C). The reference is the block written with the submodules' own
forward calls; outputs and gradients must match, and the path must not apply where it would not
be exact.
"""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import pytest
import torch
from mmcv.cnn import ConvModule
from torch import nn

import hamseg.models.fused_hamburger as fused
from hamseg.models import NMF, Hamburger
from tests.models.references import perturb_norms, random_bases, reference_block

F64 = torch.float64


def perturbed_block(variant, ham, dtype, c=16, d=12, r=4):
    torch.manual_seed(0)
    cfg = dict(type=ham, R=r, train_steps=3, eval_steps=3)
    block = Hamburger(c, d, ham_cfg=cfg, variant=variant).to(dtype)
    block.fast_path_min_positions = 1  # the fused path on these small maps too
    perturb_norms(block)
    return block


def count_matmul_breads(monkeypatch, name="_pointwise"):
    calls = []
    real = getattr(fused, name)

    def spy(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(fused, name, spy)
    return calls


CASES = [
    ("paper", "NMF", torch.float32, 1e-5),
    ("release", "NMF", torch.float32, 1e-5),
    ("paper", "CD", F64, 1e-9),
    ("release", "VQ", F64, 1e-9),
]


@pytest.mark.parametrize("variant, ham, dtype, tol", CASES)
@pytest.mark.parametrize("batch", [1, 2])
def test_block_eval_equals_module_calls(variant, ham, dtype, tol, batch, monkeypatch):
    block = perturbed_block(variant, ham, dtype).eval()
    x = torch.randn(batch, 16, 7, 9, dtype=dtype)
    bases = random_bases(batch, 12, 4, dtype)
    with torch.no_grad():
        expected = reference_block(block, x, bases)
        calls = count_matmul_breads(monkeypatch)
        low_rank = count_matmul_breads(monkeypatch, "_low_rank_pointwise")
        out = block(x, bases)
    # The lower bread (and the release's upper bread) as matrix products; the bread after the
    # ham (paper: upper bread, release: cheese) multiplied into the factors, (W D) C.
    assert len(calls) == (2 if variant == "release" else 1) and len(low_rank) == 1
    torch.testing.assert_close(out, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("variant", ["paper", "release"])
@pytest.mark.parametrize("S", [2, 3])
def test_grouped_ham_low_rank_product_equals_module_calls(variant, S, monkeypatch):
    """With S groups, W X_bar = [W_1 D_1, ..., W_S D_S] [C_1; ...; C_S] (float64, exact)."""
    torch.manual_seed(4)
    cfg = dict(type="NMF", S=S, R=3, train_steps=2, eval_steps=2)
    block = Hamburger(10, 12, ham_cfg=cfg, variant=variant).double().eval()
    block.fast_path_min_positions = 1
    for m in block.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, 10, 5, 7, dtype=F64)
    bases = random_bases(2 * S, 12 // S, 3, F64)
    with torch.no_grad():
        expected = reference_block(block, x, bases)
        low_rank = count_matmul_breads(monkeypatch, "_low_rank_pointwise")
        out = block(x, bases)
    assert len(low_rank) == 1
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)


def test_release_cheese_without_activation(monkeypatch):
    """act_cfg=None: the cheese is conv-BN only and the block ends without an activation."""
    torch.manual_seed(5)
    block = Hamburger(16, 12, ham_cfg=dict(type="NMF", R=4), act_cfg=None).eval()
    block.fast_path_min_positions = 1
    x = torch.rand(2, 16, 6, 5)
    bases = random_bases(2, 12, 4, torch.float32)
    with torch.no_grad():
        expected = reference_block(block, x, bases)
        low_rank = count_matmul_breads(monkeypatch, "_low_rank_pointwise")
        out = block(x, bases)
    assert len(low_rank) == 1 and (expected < 0).any()  # no ReLU anywhere after the sum
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_no_low_rank_product_where_the_bread_is_not_linear(monkeypatch):
    """A training-mode BatchNorm (batch statistics) and a cheese activation other than ReLU
    need the reconstruction itself: the plain fast path runs, with the same result."""
    train_bn = perturbed_block("paper", "NMF", torch.float32).train()
    gelu = Hamburger(16, 12, ham_cfg=dict(type="NMF", R=4), act_cfg=dict(type="GELU")).eval()
    gelu.fast_path_min_positions = 1
    x = torch.rand(2, 16, 6, 5)
    bases = random_bases(2, 12, 4, torch.float32)
    for block in (train_bn, gelu):
        with torch.no_grad():
            expected = reference_block(block, x, bases)
            low_rank = count_matmul_breads(monkeypatch, "_low_rank_pointwise")
            out = block(x, bases)
        assert low_rank == []
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant, ham, dtype, tol", CASES)
def test_block_training_step_equals_module_calls(variant, ham, dtype, tol):
    fast = perturbed_block(variant, ham, dtype).train()
    slow = perturbed_block(variant, ham, dtype).train()
    x = torch.randn(2, 16, 6, 5, dtype=dtype)
    bases = random_bases(2, 12, 4, dtype)
    weight = torch.randn(x.shape, dtype=dtype)
    xf, xs = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    out_f = fast(xf, bases)
    out_s = reference_block(slow, xs, bases)
    (out_f * weight).sum().backward()
    (out_s * weight).sum().backward()
    torch.testing.assert_close(out_f, out_s, rtol=tol, atol=tol)
    torch.testing.assert_close(xf.grad, xs.grad, rtol=tol * 10, atol=tol * 10)
    for (name, p_f), p_s in zip(fast.named_parameters(), slow.parameters()):
        torch.testing.assert_close(p_f.grad, p_s.grad, rtol=tol * 10, atol=tol * 10, msg=name)
    for (name, b_f), b_s in zip(fast.named_buffers(), slow.buffers()):  # BN running stats
        torch.testing.assert_close(b_f, b_s, rtol=tol, atol=tol, msg=name)


def test_fallbacks_use_the_module_calls(monkeypatch):
    block = perturbed_block("paper", "NMF", torch.float32).eval()
    x = torch.randn(1, 16, 6, 6)
    bases = random_bases(1, 12, 4, torch.float32)
    with torch.no_grad():
        expected = reference_block(block, x, bases)
        calls = count_matmul_breads(monkeypatch)
        # small maps (the default threshold is 32 x 32 positions): bit-identical module calls
        del block.fast_path_min_positions
        assert torch.equal(block(x, bases), expected)
        block.fast_path_min_positions = 1
        # channels-last input (not contiguous in NCHW)
        out = block(x.contiguous(memory_format=torch.channels_last), bases)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
        # a hook on a bread must fire
        fired = []
        handle = block.upper_bread.register_forward_hook(lambda *a: fired.append(1))
        block(x, bases)
        handle.remove()
        assert fired == [1]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            block(x, bases)
    assert calls == []


def test_input_and_running_stats_are_left_alone():
    block = perturbed_block("release", "NMF", torch.float32).eval()
    x = torch.randn(1, 16, 6, 6)
    keep = x.clone()
    stats = [b.clone() for b in block.buffers()]
    with torch.no_grad():
        block(x)
    assert torch.equal(x, keep)
    assert all(torch.equal(a, b) for a, b in zip(stats, block.buffers()))


@pytest.mark.parametrize("variant", ["paper", "release"])
def test_training_graph_has_no_in_place_view_copies(variant):
    """In-place ops on views of autograd outputs make backward copy whole gradients."""
    block = perturbed_block(variant, "NMF", torch.float32).train()
    out = block(torch.randn(1, 16, 6, 5, requires_grad=True))
    names, stack, seen = [], [out.grad_fn], set()
    while stack:
        fn = stack.pop()
        if fn is not None and fn not in seen:
            seen.add(fn)
            names.append(type(fn).__name__)
            stack.extend(f for f, _ in fn.next_functions)
    assert "AddmmBackward0" in names  # the fast path ran
    assert not [n for n in names if "CopySlices" in n or "AsStrided" in n], names


SWITCHES = [
    dict(with_ham=False),
    dict(with_upper_bread=False),
    dict(with_lower_bread=False),
    dict(with_lower_bread=False, with_upper_bread=False),
]


@pytest.mark.parametrize("variant", ["paper", "release"])
@pytest.mark.parametrize("switches", SWITCHES)
def test_table2_blocks_take_the_module_calls(variant, switches, monkeypatch):
    """Without one of its parts the block is not one the fused path handles: it does not
    apply, and the module calls run (the full block with the same settings takes it)."""
    torch.manual_seed(6)
    cfg = dict(type="NMF", R=4, train_steps=3, eval_steps=3)
    block = Hamburger(16, ham_cfg=cfg, variant=variant, **switches).eval()
    full = Hamburger(16, ham_cfg=cfg, variant=variant).eval()
    block.fast_path_min_positions = full.fast_path_min_positions = 1
    x = torch.rand(2, 16, 6, 5)
    assert fused.applies(full, x) and not fused.applies(block, x)
    calls = count_matmul_breads(monkeypatch)
    with torch.no_grad():
        block(x)
    assert calls == []


def test_a_hook_on_the_ham_fires(monkeypatch):
    """(W D) C bypasses the ham's forward: a hook on the ham sends the block to the module
    calls, as a hook on any other part does."""
    block = perturbed_block("release", "NMF", torch.float32).eval()
    x = torch.rand(1, 16, 6, 5)
    fired = []
    handle = block.ham.register_forward_hook(lambda *a: fired.append(1))
    assert not fused.applies(block, x)
    low_rank = count_matmul_breads(monkeypatch, "_low_rank_pointwise")
    with torch.no_grad():
        block(x)
    handle.remove()
    assert fired == [1] and low_rank == [] and fused.applies(block, x)


class ThirdLayout(nn.Module):
    """A block laid out like mmseg's SegNeXt Hamburger (``ham_in`` 1x1 conv with bias, ReLU,
    NMF, ``ham_out`` 1x1 conv-norm, ReLU(Z + .)): a new layout needs only ``layout()``."""

    fast_path_min_positions = 1

    def __init__(self, c, norm_cfg):
        super().__init__()
        self.ham_in = ConvModule(c, c, 1, norm_cfg=None, act_cfg=None)
        self.relu = nn.ReLU(inplace=True)
        self.ham = NMF(R=3, train_steps=3, eval_steps=3)
        self.ham_out = ConvModule(c, c, 1, norm_cfg=norm_cfg, act_cfg=None)
        self.act = nn.ReLU(inplace=True)

    def layout(self):
        return fused.Layout((self.ham_in, self.relu), self.ham, (self.ham_out,), self.act)

    def forward(self, x, bases=None, plain=False):
        if not plain and fused.applies(self, x):
            return fused.forward(self, x, bases)
        return self.act(x + self.ham_out(self.ham(self.relu(self.ham_in(x)), bases)))


@pytest.mark.parametrize(
    "norm_cfg, low_rank_calls",
    [(dict(type="BN"), 1), (dict(type="GN", num_groups=4), 0)],  # GN cannot be folded
)
def test_a_third_layout_reuses_the_fused_path(norm_cfg, low_rank_calls, monkeypatch):
    torch.manual_seed(7)
    block = ThirdLayout(8, norm_cfg).double()
    perturb_norms(block)
    x = torch.randn(2, 8, 5, 7, dtype=F64)
    bases = random_bases(2, 8, 3, F64)
    assert fused.applies(block, x)
    block.eval()
    with torch.no_grad():
        expected = block(x, bases, plain=True)
        calls = count_matmul_breads(monkeypatch)
        low_rank = count_matmul_breads(monkeypatch, "_low_rank_pointwise")
        out = block(x, bases)
    assert len(calls) == 2 - low_rank_calls and len(low_rank) == low_rank_calls
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)
    # training: the same outputs and gradients as the module calls
    block.train()
    weight = torch.randn(x.shape, dtype=F64)
    grads = []
    for plain in (True, False):
        xi = x.clone().requires_grad_(True)
        block.zero_grad()
        (block(xi, bases, plain=plain) * weight).sum().backward()
        grads.append([xi.grad] + [p.grad.clone() for p in block.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


def test_batched_products_backward_makes_no_copies():
    """W x for a batch (the breads in training): equal to the conv, and its backward is
    products only (matmul's would copy x and the gradient transposed, a pass over each)."""
    from torch.profiler import profile

    x = torch.randn(3, 6, 5, 7, dtype=F64, requires_grad=True)
    w = torch.randn(4, 6, dtype=F64, requires_grad=True)
    b = torch.randn(4, dtype=F64, requires_grad=True)
    out = fused._pointwise(x, w, b, relu=True)
    expected = torch.relu(torch.nn.functional.conv2d(x, w.view(4, 6, 1, 1), b))
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    with profile() as prof:
        out.backward(torch.randn(out.shape, dtype=F64))
    copies = [e.name for e in prof.events() if e.name in ("aten::copy_", "aten::clone")]
    assert copies == []
