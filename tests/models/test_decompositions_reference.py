"""The decompositions' in-place fast path equals straightforward references (Alg. 1-3).

The fast path (issue [speed]): in-place NMF steps writing into reused buffers, the final code
update recorded as one product, the reconstruction written over the ham's input without
autograd. The references below are written out plainly (out-of-place, paper order) and the
decompositions must reproduce their outputs and gradients.
"""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import pytest
import torch
import torch.nn.functional as F

from hamseg.models import CD, NMF, VQ
from tests.models.references import random_bases

F64 = torch.float64
EPS = 1e-6


def nmf_reference(X, D, K, X_grad=None):
    """Alg. 2 as released: codes softmax(X^T D), K steps (C then D), one more C update on
    ``X_grad`` (X itself unless given), reconstruction D C^T. X (b, d, n), D (b, d, r)."""
    C = torch.softmax(X.transpose(1, 2) @ D, dim=-1)  # C^T, (b, n, r)
    for _ in range(K):
        C = C * (X.transpose(1, 2) @ D) / (C @ (D.transpose(1, 2) @ D) + EPS)
        D = D * (X @ C) / (D @ (C.transpose(1, 2) @ C) + EPS)
    X_grad = X if X_grad is None else X_grad
    C = C * (X_grad.transpose(1, 2) @ D) / (C @ (D.transpose(1, 2) @ D) + EPS)
    return D @ C.transpose(1, 2)


@pytest.mark.parametrize("dtype, tol", [(F64, 1e-10), (torch.float32, 2e-5)])
def test_nmf_eval_equals_reference(dtype, tol):
    g = torch.Generator().manual_seed(1)
    x = torch.rand(2, 32, 12, 10, generator=g, dtype=dtype)
    D = random_bases(2, 32, 8, dtype)
    ham = NMF(R=8, train_steps=6, eval_steps=6).eval()
    with torch.no_grad():
        out = ham(x, D)
    ref = nmf_reference(x.double().flatten(2), D.double(), 6).reshape(x.shape)
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype, tol", [(F64, 1e-10), (torch.float32, 5e-5)])
def test_nmf_one_step_gradient_equals_reference(dtype, tol):
    g = torch.Generator().manual_seed(2)
    x = torch.rand(1, 24, 9, 11, generator=g, dtype=dtype)
    D = random_bases(1, 24, 6, dtype)
    weight = torch.randn(x.shape, generator=g, dtype=dtype)

    xm = x.clone().requires_grad_(True)
    out = NMF(R=6, train_steps=6, grad="one_step")(xm, D)
    (out * weight).sum().backward()

    xr = x.double().requires_grad_(True)
    X = xr.flatten(2)
    ref = nmf_reference(X.detach(), D.double(), 6, X_grad=X).reshape(x.shape)
    (ref * weight.double()).sum().backward()
    torch.testing.assert_close(out.detach().double(), ref.detach(), rtol=tol, atol=tol)
    torch.testing.assert_close(xm.grad.double(), xr.grad, rtol=tol, atol=tol)


def test_one_step_graph_is_one_update_and_saves_one_code_sized_tensor():
    x = torch.rand(1, 16, 6, 6, requires_grad=True)
    saved = []

    def pack(t):
        saved.append(tuple(t.shape))
        return t

    ham = NMF(R=4, train_steps=6, grad="one_step")
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = ham(x)
    # Saved for backward: the dictionary (for D^T X and for D C^T, d x r each) and one code-
    # sized factor C / (D^T D C + eps) (r x n); nothing of size d x n (X is not saved).
    sizes = sorted(torch.Size(s).numel() for s in saved)
    assert sizes == [16 * 4, 16 * 4, 36 * 4], saved
    nodes, stack = set(), [out.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is not None and fn not in nodes:
            nodes.add(fn)
            stack.extend(f for f, _ in fn.next_functions)
    # view, bmm, transpose (reconstruction) + mul, bmm, transpose (final update) + fold view
    # + the leaf: nothing of the 6 iterations.
    assert len(nodes) == 8
    # With BPTT the graph holds all 6 iterations.
    bptt = NMF(R=4, train_steps=6, grad="bptt")(x)
    count, stack, seen = 0, [bptt.grad_fn], set()
    while stack:
        fn = stack.pop()
        if fn is not None and fn not in seen:
            seen.add(fn)
            count += 1
            stack.extend(f for f, _ in fn.next_functions)
    assert count > 60


def test_in_place_steps_reuse_their_buffers(monkeypatch):
    """Every in-place step writes its N x R and D x R products into the same four buffers."""
    ham = NMF(R=4, eval_steps=5).eval()
    targets = []
    real_bmm = torch.bmm

    def spy(a, b, *, out=None):
        if out is not None:
            targets.append(out.data_ptr())
        return real_bmm(a, b, out=out)

    monkeypatch.setattr(torch, "bmm", spy)
    with torch.no_grad():
        ham(torch.rand(1, 8, 6, 7))
    # 5 steps x 4 buffered products; the reconstruction gets its own memory (the input is
    # the caller's: reuse_input is False).
    assert len(targets) == 20 and len(set(targets)) == 4


def test_reuse_input_overwrites_only_when_allowed():
    x = torch.rand(1, 8, 5, 6)
    D = random_bases(1, 8, 3, torch.float32)
    ham = NMF(R=3).eval()
    keep = x.clone()
    with torch.no_grad():
        expected = ham(x, D)
        assert torch.equal(x, keep)  # default: the input is left alone
        out = ham(x, D, reuse_input=True)
    assert out.data_ptr() == x.data_ptr()
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    x = keep.clone().requires_grad_(True)
    out = ham(x, D, reuse_input=True)  # with autograd: never overwritten
    assert out.data_ptr() != x.data_ptr() and torch.equal(x.detach(), keep)


def soft_reference(kind, X, D, K, X_final=None, inv_t=100.0, beta=0.1):
    """Alg. 1 (VQ) / Alg. 3 (CD) as written, X normalised first (cosine = X_unit^T D_unit):
    K steps on X, the final codes on ``X_final`` (X unless given), reconstruction D C."""

    def assign(X, D, eps):
        cos = F.normalize(X, dim=1, eps=eps).transpose(1, 2) @ F.normalize(D, dim=1, eps=EPS)
        return torch.softmax(inv_t * cos, dim=-1)  # C^T, (b, n, r)

    for _ in range(K):
        C = assign(X, D, 1e-12)
        C = C / (C.sum(dim=1, keepdim=True) + EPS)
        D = X @ C if kind == "VQ" else F.normalize(X @ C, dim=1, eps=EPS)
    X_final = X if X_final is None else X_final
    if kind == "VQ":
        return D @ assign(X_final, D, EPS).transpose(1, 2)
    gram = D.transpose(1, 2) @ D + beta * torch.eye(D.shape[-1], dtype=D.dtype)
    return D @ torch.linalg.solve(gram, D.transpose(1, 2) @ X_final)


@pytest.mark.parametrize("cls", [VQ, CD])
@pytest.mark.parametrize("training", [False, True])
def test_soft_clustering_equals_reference_with_normalised_x(cls, training):
    """The column norms of X are applied to the (N, R) logits instead of to X (float64: no
    amplification of rounding by the 1/T = 100 softmax); one-step gradient included."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 16, 7, 9, generator=g, dtype=F64)
    D = F.normalize(torch.randn(2, 16, 5, generator=g, dtype=F64), dim=1)
    weight = torch.randn(x.shape, generator=g, dtype=F64)
    xm, xr = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    out = cls(R=5, train_steps=4, eval_steps=4).train(training)(xm, D)
    (out * weight).sum().backward()
    X = xr.flatten(2)
    ref = soft_reference(cls.__name__, X.detach(), D, 4, X_final=X).reshape(x.shape)
    (ref * weight).sum().backward()
    torch.testing.assert_close(out.detach(), ref.detach(), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(xm.grad, xr.grad, rtol=1e-8, atol=1e-8)


def test_factorize_gives_the_reconstruction_as_a_product():
    x = torch.rand(2, 12, 5, 6, dtype=F64)
    bases = random_bases(4, 6, 3, F64)
    ham = NMF(S=2, R=3).eval()
    with torch.no_grad():
        dictionary, coef = ham.factorize(x, bases)
        expected = ham(x, bases)
    assert dictionary.shape == (4, 6, 3) and coef.shape == (4, 30, 3)
    torch.testing.assert_close((dictionary @ coef.transpose(1, 2)).reshape(x.shape), expected)
    with pytest.raises(ValueError, match="float32/64"):
        ham.factorize(x.half(), None)


@pytest.mark.parametrize("cls", [NMF, CD, VQ])
def test_float32_guard_is_free_for_float32(cls, monkeypatch):
    """No cast and no copy of a float32 input: the folded X is a view of it."""
    ham = cls(R=3).eval()
    seen = []
    real = ham._decompose

    def spy(x, bases, reuse_input=False):
        seen.append((x.data_ptr(), reuse_input))
        return real(x, bases, reuse_input)

    monkeypatch.setattr(ham, "_decompose", spy)
    x = torch.rand(1, 6, 4, 5)
    with torch.no_grad():
        ham(x)
        ham(x.half())
    assert seen[0] == (x.data_ptr(), False)
    assert seen[1][1] is True  # the float32 copy of a half input is the ham's own memory


@pytest.mark.parametrize("cls", [NMF, CD, VQ])
def test_bptt_without_autograd_runs_the_in_place_steps(cls):
    """Inference with grad='bptt' computes what 'one_step' computes (no graph either way),
    in place, and leaves a given dictionary alone."""
    x = torch.rand(2, 8, 5, 7, dtype=F64)
    bases = random_bases(2, 8, 3, F64)
    keep = bases.clone()
    one_step = cls(R=3, eval_steps=4, grad="one_step").eval()
    bptt = cls(R=3, eval_steps=4, grad="bptt").eval()
    with torch.no_grad():
        expected = one_step(x, bases)
        out = bptt(x, bases)
    assert torch.equal(bases, keep)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)


def test_nmf_initial_logits_are_the_first_numerator(monkeypatch):
    """In place, X^T D for the initial codes is not computed again by the first C update:
    of the products with X (init X^T D, K x (X^T D, X C), final D^T X) 2 K + 1 run, not
    2 K + 2."""
    x = torch.rand(1, 8, 6, 7)
    big = []
    real_bmm = torch.bmm

    def spy(a, b, *, out=None):
        if any(set(t.shape[1:]) == {8, 42} for t in (a, b)):  # X (8 x 42) is an operand
            big.append(1)
        return real_bmm(a, b, out=out)

    monkeypatch.setattr(torch, "bmm", spy)
    with torch.no_grad():
        NMF(R=4, eval_steps=5).eval()(x)
    assert len(big) == 2 * 5 + 1
