"""CD's ridge solve (App. B, Eq. 15): the exportable Gauss-Jordan inverse against torch's LU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hamseg.models.decompositions import CD, ridge_solve, spd_inverse

F64 = torch.float64


def ridge_system(batch: int, D: int, R: int, N: int, spread: float, dtype=torch.float32):
    """(D^T D + 0.1 I, D^T X) for unit dictionary columns scattered by ``spread`` around one
    direction: a small spread makes the atoms nearly collinear and the system ill-conditioned."""
    gen = torch.Generator().manual_seed(R * 1000 + N)
    centre = torch.randn(batch, D, 1, generator=gen, dtype=dtype)
    scatter = torch.randn(batch, D, R, generator=gen, dtype=dtype)
    bases = F.normalize(centre + spread * scatter, dim=1)
    x = torch.randn(batch, D, N, generator=gen, dtype=dtype)
    # 0.1 I + (B, D, R)^T @ (B, D, R) -> (B, R, R)
    gram = torch.baddbmm(0.1 * torch.eye(R, dtype=dtype), bases.transpose(1, 2), bases)
    # (B, D, R)^T @ (B, D, N) -> (B, R, N)
    return gram, torch.bmm(bases.transpose(1, 2), x)


@pytest.mark.parametrize("R", [1, 5, 7])
def test_spd_inverse_is_the_inverse_in_float64(R):
    gram, _ = ridge_system(3, 11, R, 2, spread=1.0, dtype=F64)
    inverse = spd_inverse(gram)
    torch.testing.assert_close(inverse, torch.linalg.inv(gram), rtol=1e-12, atol=1e-12)
    eye = torch.eye(R, dtype=F64).expand(3, R, R)
    # (3, R, R) @ (3, R, R) -> (3, R, R)
    torch.testing.assert_close(torch.bmm(inverse, gram), eye, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("R", "N", "spread", "min_cond"),
    [(17, 101, 1.0, 5.0), (64, 257, 1.0, 50.0), (64, 257, 0.05, 500.0)],
    ids=["r17", "r64", "r64-ill-conditioned"],
)
def test_inverse_times_rhs_equals_linalg_solve_within_1e4_in_float32(R, N, spread, min_cond):
    """The issue's bound, up to condition numbers near the worst that unit columns allow,
    (R + beta) / beta = 641 for R = 64, beta = 0.1."""
    gram, rhs = ridge_system(2, 3 * R + 1, R, N, spread)
    assert torch.linalg.cond(gram.double()).max() > min_cond  # the case is as hard as named
    solved = torch.linalg.solve(gram, rhs)
    # (2, R, R) @ (2, R, N) -> (2, R, N)
    mine = torch.bmm(spd_inverse(gram), rhs)
    assert ((mine - solved).abs().max() / solved.abs().max()).item() < 1e-4


def test_ridge_solve_is_lu_eagerly_and_the_inverse_in_a_trace():
    gram, rhs = ridge_system(2, 23, 9, 31, spread=1.0)
    assert torch.equal(ridge_solve(gram, rhs), torch.linalg.solve(gram, rhs))
    traced = torch.jit.trace(ridge_solve, (gram, rhs))
    kinds = {node.kind() for node in traced.graph.nodes()}
    assert "aten::linalg_solve" not in kinds and "aten::bmm" in kinds
    other_gram, other_rhs = ridge_system(2, 23, 9, 31, spread=0.5)  # the trace generalises
    expected = torch.linalg.solve(other_gram, other_rhs)
    # the two solves round differently (cond * eps, module docstring): 2.2e-6 seen on one CPU
    torch.testing.assert_close(traced(other_gram, other_rhs), expected, rtol=1e-4, atol=1e-5)


def test_a_traced_cd_ham_computes_the_eager_result_without_linalg():
    """The whole ham, seeded, traced as the ONNX exporter traces it (the exported graph run by
    ONNX Runtime: tests/apis/test_export.py)."""
    ham = CD(R=8, inv_t=10, eval_steps=3, eval_seed=0).eval()
    x = torch.randn(2, 16, 7, 9)
    with torch.no_grad():
        eager = ham(x)
        traced = torch.jit.trace(ham, (x,))
    assert "aten::linalg_solve" not in {node.kind() for node in traced.graph.nodes()}
    torch.testing.assert_close(traced(x), eager, rtol=1e-4, atol=1e-5)
