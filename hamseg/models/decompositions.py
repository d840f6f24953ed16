"""The hams of Hamburger: soft VQ (Alg. 1), NMF (Alg. 2) and soft CD (Alg. 3).

Geng et al., ICLR 2021, Sec. 2.2.2-2.3, App. B and F; where the paper is silent, the authors'
release (eps 1e-6, update order, NMF's initial codes). Layout as the paper's: X (B*S, D, N),
dictionary D (B*S, D, R), codes C (B*S, R, N), reconstruction D C (Eq. 7). With ``eval_draws``
= K the K decompositions run side by side: D (B*S, D, K*R), C (B*S, K*R, N).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.nn.functional as F
from mmseg.registry import MODELS
from torch import Tensor, nn

from .tracing import is_tracing, outside_trace

__all__ = ["CD", "NMF", "VQ", "MatrixDecomposition2D", "ridge_solve"]

EPS = 1e-6  #: added to every denominator, as in the release
#: Evaluation of a random-init ham (docs/evaluation.md). 'paper': a new dictionary at every
#: forward (the release, mmseg). 'ensemble': the mean of the reconstructions from 12
#: dictionaries drawn from seed 0 (deterministic).
EVAL_PROTOCOLS = {
    "paper": dict(eval_seed=None, eval_draws=1),
    "ensemble": dict(eval_seed=0, eval_draws=12),
}
DEFAULT_EVAL = EVAL_PROTOCOLS["paper"]
INITS = ("random", "fixed", "learned", "online")
GRADS = ("one_step", "bptt")


class MatrixDecomposition2D(nn.Module):
    """What the hams share. A subclass writes ``local_step(x, bases, coef) -> (bases, coef)``,
    one iteration of Alg. 1-3, and ``compute_coef(x, bases, coef) -> coef``, the final code
    update (with the one-step gradient the only step autograd records); x is X (B*S, D, N), bases
    D (B*S, D, K*R), coef C (B*S, K*R, N) or None before the first step.

    Args:
        S: Groups: the channels split into S independent decompositions.
        D: Rows of X, C // S (spatial folding) or H * W (channel folding); needed by ``init``
            'fixed', 'learned' and 'online', else checked against the input when given.
        R: Rank, the number of atoms (segmentation: r = 64).
        train_steps, eval_steps: Iterations K in training and in eval mode (App. F).
        inv_t: Inverse temperature 1 / T of the softmax codes (Alg. 1, 3; Table 9).
        eta: Step of the moving average of ``init='online'``.
        spatial: X = (C/S) x (H*W) if True, (H*W) x (C/S) if False.
        init: Initial dictionary (App. F, Table 8): 'random' (drawn at every forward), 'fixed',
            'learned' (needs ``grad='bptt'``) or 'online' (an EMA of the solved ones).
        grad: 'one_step' (only the last code update records gradient, Eq. 13) or 'bptt'.
        eval_seed: With ``init='random'``, eval mode starts from dictionaries drawn once from a
            generator seeded with it (None: a new draw at every forward, the paper's).
        eval_draws: K seeded dictionaries in eval mode; the output is the mean of the K
            reconstructions (``EVAL_PROTOCOLS['ensemble']``).
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
        if min(S, R, eval_draws, D or 1) < 1 or min(train_steps, eval_steps) < 0:
            raise ValueError(f"S, D, R, eval_draws must be >= 1 and steps >= 0: {S, D, R}")
        if init not in INITS or grad not in GRADS:
            raise ValueError(f"init: one of {INITS}, grad: {GRADS}; got {init!r}, {grad!r}")
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
        #: The seeded dictionaries (S, D, K*R) of the last seeded evaluation (not in the state
        #: dict): drawn once per (eval_seed, K, D, device, dtype), a constant of any trace.
        self.seeded_dictionary: Tensor | None = None
        self._seeded_key: tuple | None = None
        bases = None if init == "random" else self.draw_bases(S, D)  # (S, D, R)
        if init == "learned":
            self.bases = nn.Parameter(bases)
        else:
            self.register_buffer("bases", bases)  # None: drawn at every forward

    def init_coef(self, x: Tensor, bases: Tensor) -> Tensor | None:
        """Codes C before the first step; None: the first step computes them."""
        return None

    def draw_bases(self, batch: int, D: int, like: Tensor | None = None, generator=None, atoms=0):
        """A random dictionary (batch, D, atoms or R) with unit columns, in ``like``'s dtype."""
        draw = torch.rand if self.init_distribution == "uniform" else torch.randn
        kwargs = dict(device=like.device, dtype=like.dtype) if like is not None else {}
        return F.normalize(draw(batch, D, atoms or self.R, generator=generator, **kwargs), dim=1)

    def seeded_bases(self, x: Tensor, draws: int) -> Tensor:
        """The K = ``draws`` dictionaries of seeded evaluation side by side, (S, D, K*R): draw k
        of group s is the (k*S + s)-th (D, R) draw of a generator seeded with ``eval_seed`` on
        X's device; drawn outside any trace (a constant of it) and kept."""
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

    @property
    def seeded(self) -> bool:
        """Whether this call draws from ``eval_seed`` (eval mode with a seed)."""
        return not self.training and self.eval_seed is not None

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

    def _initial_bases(self, x: Tensor, batch: int, bases: Tensor | None, draws: int) -> Tensor:
        """The initial dictionary (B*S, D, K*R) for X (B*S, D, N), in X's dtype."""
        if bases is not None:
            if bases.shape != (x.shape[0], x.shape[1], self.R):
                raise ValueError(f"bases must have shape (B*S, D, R), got {tuple(bases.shape)}")
            return bases.to(x.device, x.dtype)
        if self.init != "random":
            return self.bases.to(x.dtype).repeat(batch, 1, 1)  # (S, D, R) -> (B*S, D, R)
        if self.seeded:  # (S, D, K*R) -> (B*S, D, K*R)
            return self.seeded_bases(x, draws).repeat(batch, 1, 1)
        return self.draw_bases(x.shape[0], x.shape[1], x, atoms=draws * self.R)

    @torch.no_grad()
    def _online_update(self, bases: Tensor, batch: int) -> None:
        """EMA warm start (App. F): buf <- normalize(buf + eta (mean_batch(D) - buf))."""
        target = bases.reshape(batch, self.S, *bases.shape[1:]).mean(dim=0)  # (S, D, R)
        self.bases.lerp_(target.to(self.bases.dtype), self.eta)
        self.bases.copy_(F.normalize(self.bases, dim=1))

    def factorize(self, x: Tensor, bases: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The solved factors of x (B, C, H, W), D (B*S, D, K*R) / K and C (B*S, K*R, N), in
        float32 at least with autocast off; ``bases``: a given initial dictionary (B*S, D, R)."""
        B, C, H, W = x.shape
        if not is_tracing() and C % self.S:  # (in a trace C is symbolic)
            raise ValueError(f"channels C={C} are not divisible by S={self.S}")
        with torch.autocast(x.device.type, enabled=False):
            X = (x.float() if torch.finfo(x.dtype).bits < 32 else x).reshape(B * self.S, -1, H * W)
            X = X if self.spatial else X.transpose(1, 2)  # (B*S, D, N)
            if self.D is not None and not is_tracing() and X.shape[1] != self.D:
                raise ValueError(f"input gives D={X.shape[1]}, the ham was built with D={self.D}")
            random_eval = not self.training and self.init == "random" and bases is None
            draws = self.eval_draws if random_eval else 1
            dictionary = self._initial_bases(X, B, bases, draws)
            # Sec. 2.3: with the one-step gradient no graph for the K iterations
            with torch.set_grad_enabled(torch.is_grad_enabled() and self.grad == "bptt"):
                coef = self.init_coef(X, dictionary)
                for _ in range(self.train_steps if self.training else self.eval_steps):
                    dictionary, coef = self.local_step(X, dictionary, coef)
            coef = self.compute_coef(X, dictionary, coef)
            if self.training and self.init == "online":
                self._online_update(dictionary, B)
            # the mean of the K reconstructions: (D_1 .. D_K) / K @ (C_1; ..; C_K)
            return (dictionary / draws if draws > 1 else dictionary), coef

    def forward(self, x: Tensor, bases: Tensor | None = None) -> Tensor:
        """The low-rank reconstruction X_bar = D C (Eq. 7) of x (B, C, H, W) in x's shape and
        dtype, computed in float32 at least; ``bases``: an initial dictionary (B*S, D, R)."""
        with torch.autocast(x.device.type, enabled=False):
            dictionary, coef = self.factorize(x, bases)
            out = torch.bmm(dictionary, coef)  # (B*S, D, K*R) @ (B*S, K*R, N) -> (B*S, D, N)
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
        if not self.seeded:
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


def _column_scale(x: Tensor, inv_t: float, eps: float) -> Tensor:
    """inv_t / max(||x_n||, eps) of every column of X (B*S, D, N), as (B*S, 1, N)."""
    return inv_t / x.square().sum(dim=1, keepdim=True).clamp_min(eps * eps).sqrt()


class _SoftClustering(MatrixDecomposition2D):
    """Soft VQ and CD: codes C = softmax(inv_t cosine(D, X)) over R."""

    def assign(self, x: Tensor, bases: Tensor, eps: float = 1e-12) -> Tensor:
        """softmax(inv_t cosine(D, X)) (B*S, K*R, N); ||x|| floored at ``eps``."""
        # (B*S, K*R, D) @ (B*S, D, N) -> (B*S, K*R, N)
        logits = torch.bmm(F.normalize(bases, dim=1, eps=EPS).transpose(1, 2), x)
        return self._softmax_per_draw(logits * _column_scale(x, self.inv_t, eps))


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
    solve the ridge problem C = (D^T D + beta I)^-1 D^T X (Eq. 15; exportable: :func:`ridge_solve`).

    Args:
        beta: Ridge weight (paper: 0.01 and 0.1 alike; release 0.1).
    """

    def __init__(self, beta: float = 0.1, **kwargs: Any) -> None:
        if beta <= 0:
            raise ValueError(f"beta must be > 0 (D^T D + beta I must be invertible), got {beta}")
        super().__init__(**kwargs)
        self.beta = beta

    def local_step(self, x: Tensor, bases: Tensor, coef: Tensor | None) -> tuple[Tensor, Tensor]:
        """C <- softmax(inv_t cosine(D, X)), D <- normalize(X C^T)."""
        coef = self.assign(x, bases)
        # (B*S, D, N) @ (B*S, N, K*R) -> (B*S, D, K*R), unit columns
        return F.normalize(torch.bmm(x, coef.transpose(1, 2)), dim=1, eps=EPS), coef

    def compute_coef(self, x: Tensor, bases: Tensor, coef: Tensor | None) -> Tensor:
        """C = (D^T D + beta I)^-1 D^T X, per draw."""
        ridge = self.beta * torch.eye(self.R, device=x.device, dtype=x.dtype)
        gram = self._gram_per_draw(bases) + ridge  # out of place: ONNX loses a diagonal write
        rhs = torch.bmm(bases.transpose(1, 2), x)  # (B*S, K*R, D) @ (B*S, D, N)
        # (B*S*K, R, R)^-1 @ (B*S*K, R, N) -> (B*S, K*R, N)
        return ridge_solve(gram, rhs.reshape(-1, self.R, rhs.shape[2])).reshape(rhs.shape)


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


def ridge_solve(gram: Tensor, rhs: Tensor) -> Tensor:
    """gram^-1 rhs (B, R, N) for gram = D^T D + beta I (B, R, R): ``torch.linalg.solve``, or
    under a trace (ONNX has no solve nor inverse) :func:`spd_inverse`; both err by ~cond * eps,
    cond <= (r + beta) / beta for unit dictionary columns."""
    if not is_tracing():
        return torch.linalg.solve(gram, rhs)
    return torch.bmm(spd_inverse(gram), rhs)  # (B, R, R) @ (B, R, N)
