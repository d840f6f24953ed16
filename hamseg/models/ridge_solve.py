"""CD's ridge solve, C = (D^T D + beta I)^-1 D^T X (App. B, Eq. 15), eager and exportable.

Eagerly ``torch.linalg.solve``; ONNX has no solve nor inverse, so while a graph is recorded the
r x r matrix is inverted by Gauss-Jordan elimination (slices, products, differences). It is SPD
with eigenvalues >= beta, so no pivoting is needed; both solves err by ~cond * eps, cond <=
(r + beta) / beta for unit dictionary columns (docs/deploy.md).
"""

from __future__ import annotations

import torch
from torch import Tensor

from hamseg.models.tracing import is_tracing

__all__ = ["ridge_solve", "spd_inverse"]


def spd_inverse(a: Tensor) -> Tensor:
    """A^-1 (B, R, R) of symmetric positive definite A (B, R, R) by Gauss-Jordan elimination.

    Step k on [A | I]: M <- M - (M[:, k] - e_k) M[k] / M[k, k] divides row k by its pivot and
    removes column k from every other row.
    """
    R = a.shape[-1]
    eye = torch.eye(R, dtype=a.dtype, device=a.device)
    m = torch.cat([a, eye.expand_as(a)], dim=-1)  # (B, R, 2R): [A | I]
    for k in range(R):
        pivot_row = m[:, k : k + 1, :] / m[:, k : k + 1, k : k + 1]  # (B, 1, 2R)
        factor = m[:, :, k : k + 1] - eye[:, k : k + 1]  # (B, R, 1)
        m = m - factor * pivot_row  # (B, R, 1) * (B, 1, 2R) -> (B, R, 2R)
    return m[:, :, R:]


def ridge_solve(gram: Tensor, rhs: Tensor) -> Tensor:
    """gram^-1 rhs, (B*S, R, N), for gram = D^T D + beta I (B*S, R, R) and rhs = D^T X."""
    if not is_tracing():
        return torch.linalg.solve(gram, rhs)
    # (B*S, R, R) @ (B*S, R, N) -> (B*S, R, N)
    return torch.bmm(spd_inverse(gram), rhs)
