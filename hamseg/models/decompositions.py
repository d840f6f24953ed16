"""The hams of Hamburger: soft VQ (Alg. 1), NMF (Alg. 2) and soft CD (Alg. 3).

Geng et al., ICLR 2021, Sec. 2.2.2-2.3, App. B and F; where the paper is silent, the authors'
release (eps 1e-6, update order, NMF's initial codes). Layout as the paper's: X (B*S, D, N),
dictionary D (B*S, D, R), codes C (B*S, R, N), reconstruction D C (Eq. 7). With ``eval_draws``
= K the K decompositions run side by side: D (B*S, D, K*R), C (B*S, K*R, N).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from mmseg.registry import MODELS
from torch import Tensor, nn

EPS = 1e-6  #: added to every denominator, as in the release


@contextlib.contextmanager
def outside_trace() -> Iterator[None]:
    """Run the body unrecorded by ``torch.jit.trace``: its tensors are constants of the trace."""
    state = torch._C._get_tracing_state()  # private: pinned by tests/models/test_decompositions.py
    torch._C._set_tracing_state(None)
    try:
        yield
    finally:
        torch._C._set_tracing_state(state)


class MatrixDecomposition2D(nn.Module):
    """What the hams share. A subclass writes ``local_step(x, bases, coef) -> (bases, coef)``,
    one iteration of Alg. 1-3, and ``compute_coef(x, bases, coef) -> coef``, the final code
    update (with the one-step gradient the only step autograd records).

    Args:
        S: Groups: the channels split into S independent decompositions.
        D: Rows of X, C // S (spatial) or H * W (channel folding); needed by a non-random init.
        R: Rank, the number of atoms.
        train_steps, eval_steps: Iterations K in training and in eval mode (App. F).
        inv_t: Inverse temperature 1 / T of the softmax codes (Alg. 1, 3; Table 9).
        eta: Step of the moving average of ``init='online'``.
        spatial: X = (C/S) x (H*W) if True, (H*W) x (C/S) if False.
        init: Initial dictionary (App. F, Table 8): 'random' (drawn at every forward), 'fixed',
            'learned' (needs ``grad='bptt'``) or 'online' (an EMA of the solved ones).
        grad: 'one_step' (only the last code update records gradient, Eq. 13) or 'bptt'.
        eval_seed, eval_draws: Eval mode of a random init: a new draw at every forward if
            ``eval_seed`` is None (the paper's), else the mean of ``eval_draws`` reconstructions
            from dictionaries drawn once (hamseg's ensemble: 0, 12; docs/evaluation.md).
    """

    init_distribution = "normal"  #: of a random dictionary: 'uniform' U[0, 1) or 'normal'
    nonnegative = False  #: whether the input must be >= 0 (a ReLU precedes the ham)

    def __init__(
        self,
        S: int = 1,
        D: int | None = None,
        R: int = 64,
        train_steps: int = 6,
        eval_steps: int = 6,
        inv_t: float = 100.0,
        eta: float = 0.9,
        spatial: bool = True,
        init: str = "random",
        grad: str = "one_step",
        eval_seed: int | None = None,
        eval_draws: int = 1,
    ) -> None:
        super().__init__()
        if init not in ("random", "fixed", "learned", "online") or grad not in ("one_step", "bptt"):
            raise ValueError(f"unknown init={init!r} or grad={grad!r}: see MatrixDecomposition2D")
        if init == "learned" and grad == "one_step":
            raise ValueError("init='learned' needs grad='bptt': one step never reaches the init")
        if init != "random" and D is None:
            raise ValueError(f"init={init!r} builds its dictionary at construction: pass D")
        self.S = S
        self.D = D
        self.R = R
        self.train_steps = train_steps
        self.eval_steps = eval_steps
        self.inv_t = float(inv_t)
        self.eta = eta
        self.spatial = spatial
        self.init = init
        self.grad = grad
        self.eval_seed = eval_seed
        self.eval_draws = eval_draws
        #: (S, D, K*R), drawn once per (eval_seed, K, D, device, dtype); not in the state dict
        self.seeded_dictionary: Tensor | None = None
        self._seeded_key: tuple | None = None
        if init == "learned":
            self.bases = nn.Parameter(self.draw_bases(S, D))  # (S, D, R)
        else:  # None: drawn at every forward
            self.register_buffer("bases", None if init == "random" else self.draw_bases(S, D))

    def init_coef(self, x: Tensor, bases: Tensor) -> Tensor | None:
        """Codes C before the first step; None: the first step computes them."""
        return None

    def draw_bases(self, batch: int, D: int, like: Tensor | None = None, generator=None, atoms=0):
        """A random dictionary (batch, D, atoms or R) with unit columns, in ``like``'s dtype."""
        draw = torch.rand if self.init_distribution == "uniform" else torch.randn
        kwargs = dict(device=like.device, dtype=like.dtype) if like is not None else {}
        return F.normalize(draw(batch, D, atoms or self.R, generator=generator, **kwargs), dim=1)

    def seeded_bases(self, x: Tensor, draws: int) -> Tensor:
        """The K = ``draws`` seeded dictionaries (S, D, K*R): draw k of group s is the (k*S + s)-th
        (D, R) draw of a generator seeded with ``eval_seed`` on X's device; drawn once."""
        with outside_trace():
            key = (self.eval_seed, draws, x.shape[1], x.device, x.dtype)
            if self._seeded_key != key:
                gen = torch.Generator(device=x.device).manual_seed(self.eval_seed)
                drawn = self.draw_bases(draws * self.S, x.shape[1], x, gen)
                # (K*S, D, R) -> (K, S, D, R) -> (S, D, K, R) -> (S, D, K*R)
                drawn = drawn.reshape(draws, self.S, x.shape[1], self.R).permute(1, 2, 0, 3)
                self.seeded_dictionary = drawn.reshape(self.S, x.shape[1], draws * self.R)
                self._seeded_key = key
        return self.seeded_dictionary

    # The K draws side by side; a one-draw ham (eval_draws=1) takes the plain operations.
    def _softmax_per_draw(self, logits: Tensor) -> Tensor:
        """Softmax over each draw's R rows of logits (B*S, K*R, N)."""
        if self.eval_draws == 1:
            return logits.softmax(dim=1)
        return logits.reshape(-1, self.R, logits.shape[2]).softmax(dim=1).reshape(logits.shape)

    def _gram_per_draw(self, a: Tensor) -> Tensor:
        """A_k^T A_k (B*S*K, R, R) for each draw's R columns of A (B*S, M, K*R)."""
        BS, M, KR = a.shape
        if self.eval_draws > 1:  # (B*S, M, K*R) -> (B*S*K, M, R)
            a = a.reshape(BS, M, KR // self.R, self.R).transpose(1, 2).reshape(-1, M, self.R)
        return torch.bmm(a.transpose(1, 2), a)  # (B*S*K, M, R)^T @ (B*S*K, M, R)

    def _left_per_draw(self, gram: Tensor, a: Tensor) -> Tensor:
        """G_k A_k (B*S, K*R, M) for G (B*S*K, R, R) and each draw's R rows of A (B*S, K*R, M)."""
        if self.eval_draws == 1:
            return torch.bmm(gram, a)  # (B*S, R, R) @ (B*S, R, M)
        # (B*S*K, R, R) @ (B*S*K, R, M) -> (B*S*K, R, M)
        return torch.bmm(gram, a.reshape(-1, self.R, a.shape[2])).reshape(a.shape)

    def forward(self, x: Tensor, bases: Tensor | None = None) -> Tensor:
        """The low-rank reconstruction X_bar = D C (Eq. 7) of x (B, C, H, W) in x's shape and
        dtype, computed in float32 at least; ``bases``: an initial dictionary (B*S, D, R)."""
        B, C, H, W = x.shape
        with torch.autocast(x.device.type, enabled=False):
            X = (x.float() if torch.finfo(x.dtype).bits < 32 else x).reshape(B * self.S, -1, H * W)
            X = X if self.spatial else X.transpose(1, 2)  # (B*S, D, N)
            random_eval = not self.training and self.init == "random" and bases is None
            draws = self.eval_draws if random_eval else 1
            if bases is not None:
                dictionary = bases.to(X.device, X.dtype)
            elif self.init != "random":  # (S, D, R) -> (B*S, D, R)
                dictionary = self.bases.to(X.dtype).repeat(B, 1, 1)
            elif random_eval and self.eval_seed is not None:  # (S, D, K*R) -> (B*S, D, K*R)
                dictionary = self.seeded_bases(X, draws).repeat(B, 1, 1)
            else:
                dictionary = self.draw_bases(X.shape[0], X.shape[1], X, atoms=draws * self.R)
            # Sec. 2.3: with the one-step gradient no graph for the K iterations
            with torch.set_grad_enabled(torch.is_grad_enabled() and self.grad == "bptt"):
                coef = self.init_coef(X, dictionary)
                for _ in range(self.train_steps if self.training else self.eval_steps):
                    dictionary, coef = self.local_step(X, dictionary, coef)
            coef = self.compute_coef(X, dictionary, coef)
            if self.training and self.init == "online":
                with torch.no_grad():  # App. F: buf <- normalize(buf + eta (mean_batch(D) - buf))
                    mean = dictionary.reshape(B, self.S, *dictionary.shape[1:]).mean(dim=0)
                    self.bases.lerp_(mean.to(self.bases.dtype), self.eta)
                    self.bases.copy_(F.normalize(self.bases, dim=1))
            # the mean of the K reconstructions: (D_1 .. D_K) / K @ (C_1; ..; C_K)
            out = torch.bmm(dictionary / draws, coef)  # (B*S, D, K*R) @ (B*S, K*R, N)
        return (out if self.spatial else out.transpose(1, 2)).reshape(x.shape).to(x.dtype)


@MODELS.register_module()
class NMF(MatrixDecomposition2D):
    """Non-negative matrix factorisation by multiplicative updates (Alg. 2, Eq. 9).

    Dictionary U[0, 1) with unit columns; codes softmax(D^T X) over R (App. F, inverse
    temperature 1 as in the release) or U(0, 1) draws (``coef_init='uniform'``, Table 8's
    remark). Each step updates C, then D; one more C update after the loop carries the gradient.
    """

    init_distribution = "uniform"
    nonnegative = True

    def __init__(self, inv_t: float = 1.0, coef_init: str = "softmax", **kwargs: Any) -> None:
        if inv_t != 1:
            warnings.warn(f"NMF forces inv_t to 1 (App. F, release); got {inv_t}", stacklevel=2)
        if coef_init not in ("softmax", "uniform"):
            raise ValueError(f"coef_init must be 'softmax' or 'uniform', got {coef_init!r}")
        super().__init__(inv_t=1.0, **kwargs)
        self.coef_init = coef_init

    def init_coef(self, x: Tensor, bases: Tensor) -> Tensor | None:
        """'uniform': U(0, 1) codes (B*S, K*R, N); in seeded evaluation one (S, R, N) draw of a
        generator seeded with ``eval_seed + 1``, shared by the batch and the K dictionaries."""
        if self.coef_init == "softmax":
            return None  # the first step computes softmax(D^T X) from its own D^T X
        (BS, _, N), KR = x.shape, bases.shape[2]
        if self.training or self.eval_seed is None:
            return torch.rand(BS, KR, N, device=x.device, dtype=x.dtype)
        gen = torch.Generator(device=x.device).manual_seed(self.eval_seed + 1)
        shared = torch.rand(self.S, self.R, N, generator=gen, device=x.device, dtype=x.dtype)
        return shared.repeat(BS // self.S, KR // self.R, 1)  # (S, R, N) -> (B*S, K*R, N)

    def local_step(self, x: Tensor, bases: Tensor, coef: Tensor | None) -> tuple[Tensor, Tensor]:
        """C <- C (D^T X) / (D^T D C), then D <- D (X C^T) / (D C C^T) (+ eps)."""
        coef = self.compute_coef(x, bases, coef)
        numer = torch.bmm(x, coef.transpose(1, 2))  # (B*S, D, N) @ (B*S, N, K*R)
        # D (C C^T) as (C C^T D^T)^T, r x r first: (B*S*K, R, R) @ (B*S, K*R, D) -> (B*S, D, K*R)
        gram = self._gram_per_draw(coef.transpose(1, 2))
        denom = self._left_per_draw(gram, bases.transpose(1, 2)).transpose(1, 2)
        return bases * numer / (denom + EPS), coef

    def compute_coef(self, x: Tensor, bases: Tensor, coef: Tensor | None) -> Tensor:
        """C <- C (D^T X) / (D^T D C + eps); without codes C starts as softmax(D^T X) over R."""
        numer = torch.bmm(bases.transpose(1, 2), x)  # (B*S, K*R, D) @ (B*S, D, N)
        if coef is None:  # the initial codes: constants of the one-step gradient
            coef = self._softmax_per_draw(numer if self.grad == "bptt" else numer.detach())
        # (D^T D) C, r x r first: (B*S*K, R, R) @ (B*S, K*R, N) -> (B*S, K*R, N)
        denom = self._left_per_draw(self._gram_per_draw(bases), coef)
        return numer.mul_(coef).div_(denom.add_(EPS))  # in place on the products' own outputs


class _SoftClustering(MatrixDecomposition2D):
    """Soft VQ and CD: codes C = softmax(inv_t cosine(D, X)) over R."""

    def assign(self, x: Tensor, bases: Tensor, eps: float = 1e-12) -> Tensor:
        """softmax(inv_t cosine(D, X)) (B*S, K*R, N); ||x|| floored at ``eps``."""
        # (B*S, K*R, D) @ (B*S, D, N) -> (B*S, K*R, N)
        logits = torch.bmm(F.normalize(bases, dim=1, eps=EPS).transpose(1, 2), x)
        scale = self.inv_t / x.square().sum(dim=1, keepdim=True).clamp_min(eps * eps).sqrt()
        return self._softmax_per_draw(logits * scale)


@MODELS.register_module()
class VQ(_SoftClustering):
    """Soft vector quantisation (Alg. 1, Eq. 8), a soft K-means (T -> 0: hard assignment)."""

    def local_step(self, x: Tensor, bases: Tensor, coef: Tensor | None) -> tuple[Tensor, Tensor]:
        """C <- softmax(inv_t cosine(D, X)), D <- X C^T diag(C 1_n)^-1 (+ eps)."""
        coef = self.assign(x, bases)
        # (B*S, D, N) @ (B*S, N, K*R) -> (B*S, D, K*R), column r over sum_n C_rn
        return torch.bmm(x, coef.transpose(1, 2)) / (coef.sum(dim=2).unsqueeze(1) + EPS), coef

    def compute_coef(self, x: Tensor, bases: Tensor, coef: Tensor | None) -> Tensor:
        return self.assign(x, bases, EPS)


@MODELS.register_module()
class CD(_SoftClustering):
    """Soft concept decomposition (Alg. 3, App. B), a soft spherical K-means; the final codes
    solve the ridge problem C = (D^T D + beta I)^-1 D^T X (Eq. 15; paper: beta 0.01 and 0.1
    alike, release 0.1), exportable: under a trace by :func:`spd_inverse`."""

    def __init__(self, beta: float = 0.1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.beta = beta

    def local_step(self, x: Tensor, bases: Tensor, coef: Tensor | None) -> tuple[Tensor, Tensor]:
        """C <- softmax(inv_t cosine(D, X)), D <- normalize(X C^T)."""
        coef = self.assign(x, bases)
        # (B*S, D, N) @ (B*S, N, K*R) -> (B*S, D, K*R), unit columns
        return F.normalize(torch.bmm(x, coef.transpose(1, 2)), dim=1, eps=EPS), coef

    def compute_coef(self, x: Tensor, bases: Tensor, coef: Tensor | None) -> Tensor:
        """C = (D^T D + beta I)^-1 D^T X per draw: ``torch.linalg.solve``, or under a trace (ONNX
        has no solve nor inverse) :func:`spd_inverse`; both err by ~cond * eps."""
        ridge = self.beta * torch.eye(self.R, device=x.device, dtype=x.dtype)
        gram = self._gram_per_draw(bases) + ridge  # out of place: ONNX loses a diagonal write
        rhs = torch.bmm(bases.transpose(1, 2), x)  # (B*S, K*R, D) @ (B*S, D, N)
        rhs_k = rhs.reshape(-1, self.R, rhs.shape[2])  # (B*S*K, R, N)
        exporting = getattr(torch.compiler, "is_exporting", lambda: False)  # torch >= 2.7
        if torch.jit.is_tracing() or torch.onnx.is_in_onnx_export() or exporting():
            # (B*S*K, R, R)^-1 @ (B*S*K, R, N)
            return torch.bmm(spd_inverse(gram), rhs_k).reshape(rhs.shape)
        return torch.linalg.solve(gram, rhs_k).reshape(rhs.shape)


def spd_inverse(a: Tensor) -> Tensor:
    """A^-1 (B, R, R) of SPD A (B, R, R) by Gauss-Jordan elimination on [A | I]: step k divides
    row k by its pivot and removes column k from every other row (no pivoting: eig >= beta)."""
    R = a.shape[-1]
    eye = torch.eye(R, dtype=a.dtype, device=a.device)
    m = torch.cat([a, eye.expand_as(a)], dim=-1)  # (B, R, 2R)
    for k in range(R):
        pivot_row = m[:, k : k + 1, :] / m[:, k : k + 1, k : k + 1]  # (B, 1, 2R)
        factor = m[:, :, k : k + 1] - eye[:, k : k + 1]  # (B, R, 1)
        m = m - factor * pivot_row  # (B, R, 1) * (B, 1, 2R) -> (B, R, 2R)
    return m[:, :, R:]
