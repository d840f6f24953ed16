"""CD's ridge solve C = (D^T D + beta I)^-1 D^T X (App. B, Eq. 15), eager and exportable.

Eagerly ``torch.linalg.solve``. ONNX has no solve nor inverse, so under a trace the r x r matrix
is inverted by Gauss-Jordan elimination (slices, products, differences): it is SPD with
eigenvalues >= beta, so no pivoting is needed; both err by ~cond * eps, cond <= (r + beta) / beta
for unit dictionary columns.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .tracing import is_tracing

__all__ = ["ridge_solve", "spd_inverse"]


def spd_inverse(a: Tensor) -> Tensor:
    """A^-1 (B, R, R) of SPD A (B, R, R) by Gauss-Jordan elimination on [A | I]: step k divides
    row k by its pivot and removes column k from every other row."""
    R = a.shape[-1]
    eye = torch.eye(R, dtype=a.dtype, device=a.device)
    m = torch.cat([a, eye.expand_as(a)], dim=-1)  # (B, R, 2R)
    for k in range(R):
        pivot_row = m[:, k : k + 1, :] / m[:, k : k + 1, k : k + 1]  # (B, 1, 2R)
        factor = m[:, :, k : k + 1] - eye[:, k : k + 1]  # (B, R, 1)
        m = m - factor * pivot_row  # (B, R, 1) * (B, 1, 2R) -> (B, R, 2R)
    return m[:, :, R:]


def ridge_solve(gram: Tensor, rhs: Tensor) -> Tensor:
    """gram^-1 rhs (B, R, N) for gram = D^T D + beta I (B, R, R) and rhs = D^T X (B, R, N)."""
    if not is_tracing():
        return torch.linalg.solve(gram, rhs)
    return torch.bmm(spd_inverse(gram), rhs)  # (B, R, R) @ (B, R, N)
