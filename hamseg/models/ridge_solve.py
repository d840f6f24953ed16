"""CD's ridge solve, C = (D^T D + beta I)^-1 D^T X (App. B, Eq. 15), eager and exportable.

Eagerly the solve is ``torch.linalg.solve`` (LU). ONNX has neither a linear solve nor a matrix
inverse, so while a graph is recorded (:func:`hamseg.models.tracing.is_tracing`: an ONNX export,
``torch.jit.trace``) the r x r system matrix is inverted by Gauss-Jordan elimination, r steps of
slices, products and differences that every exporter and runtime takes, and the inverse
multiplies D^T X in one MatMul. The system matrix is symmetric positive definite with every
eigenvalue >= beta > 0, so elimination without pivoting is stable (its pivots are the diagonals
of Schur complements, all >= beta) and the result equals the LU solve within float rounding,
of the order of cond * eps, where cond <= (r + beta) / beta for unit dictionary columns (641
for r = 64, beta = 0.1). Both solves then carry errors of that order against the exact answer.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hamseg.models.tracing import is_tracing

__all__ = ["ridge_solve", "spd_inverse"]


def spd_inverse(a: Tensor) -> Tensor:
    """Inverse of a batch of symmetric positive definite matrices by Gauss-Jordan elimination.

    Step k divides row k of [A | I] by its pivot and removes column k from every other row. In
    one update: M <- M - (M[:, k] - e_k) M[k] / M[k, k], which leaves row k divided by the
    pivot (its coefficient is M[k, k] - 1) and every other row i minus M[i, k] times it. No
    pivoting: see the module docstring.

    Args:
        a: (B, R, R), symmetric positive definite.

    Returns:
        A^-1, (B, R, R).
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
    """Y = gram^-1 rhs for the ridge system of CD.

    Args:
        gram: D^T D + beta I, (B*S, R, R), symmetric positive definite.
        rhs: D^T X, (B*S, R, N).

    Returns:
        Y, (B*S, R, N): ``torch.linalg.solve`` eagerly; while a graph is recorded the
        exportable inverse (:func:`spd_inverse`) times ``rhs``.
    """
    if not is_tracing():
        return torch.linalg.solve(gram, rhs)
    # (B*S, R, R) @ (B*S, R, N) -> (B*S, R, N)
    return torch.bmm(spd_inverse(gram), rhs)
