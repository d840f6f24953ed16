"""Matrix decompositions, the "hams" of Hamburger: VQ (Alg. 1), NMF (Alg. 2) and CD (Alg. 3).

Geng et al., ICLR 2021: Sec. 2.2.2, App. B (CD), Sec. 2.3 (one-step gradient, Eq. 13), App. F
(initialisation, temperature, K), in the paper's layout: X (B*S, D, N), the dictionary D
(B*S, D, R), the codes C (B*S, R, N), the reconstruction D C (Eq. 7). Where the paper is silent
the authors' release is followed (eps 1e-6, update order, NMF's code init).
With ``eval_draws`` = K the K decompositions of X run side by side, D (B*S, D, K*R) and C
(B*S, K*R, N): one product with X for all draws; r x r products and softmax per draw.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.nn.functional as F
from mmseg.registry import MODELS
from torch import Tensor, nn

from hamseg.models import cuda_graphs
from hamseg.models.ridge_solve import ridge_solve
from hamseg.models.tracing import is_tracing, outside_trace

__all__ = ["MatrixDecomposition2D", "NMF", "CD", "VQ"]

#: Added to every denominator of an update, as in the authors' release.
EPS = 1e-6
#: The evaluation protocols of a random-init ham (docs/evaluation.md). "paper": the authors'
#: (the release's RAND_INIT), a new random dictionary for every image at every forward, as in
#: training, reported as the mean +- std of N test runs. "ensemble": hamseg's deterministic
#: one, the mean of the reconstructions of 12 dictionaries seeded by 0.
EVAL_PROTOCOLS = {
    "paper": dict(eval_seed=None, eval_draws=1),
    "ensemble": dict(eval_seed=0, eval_draws=12),
}
#: The heads' default evaluation (docs/evaluation.md, "The default"): the paper's, which the
#: paper's numbers, mmseg's LightHamHead and every other head are measured under; the ensemble is
#: a test-time ensemble on top of it.
DEFAULT_EVAL = EVAL_PROTOCOLS["paper"]

INITS = ("random", "fixed", "learned", "online")
COEF_INITS = ("softmax", "uniform")
GRADS = ("one_step", "bptt")


class MatrixDecomposition2D(nn.Module):
    """What the hams share; subclasses write :meth:`init_coef`, :meth:`local_step` and
    :meth:`compute_coef`.

    Args:
        S: Number of groups; the C channels are split into S independent decompositions.
        D: Rows of X: C // S (spatial folding) or H * W (channel folding). Required for
            ``init`` in {'fixed', 'learned', 'online'}; otherwise checked against the input.
        R: Rank, the number of dictionary atoms (paper: r = 64 for segmentation).
        train_steps: Iterations K in training mode.
        eval_steps: Iterations K in eval mode (App. F: the same K for both).
        inv_t: Inverse temperature 1 / T of the softmax codes (Alg. 1, 3; Table 9).
        eta: Step of the moving average of ``init='online'``.
        spatial: X = (C/S) x (H*W) if True, X = (H*W) x (C/S) if False.
        init: Initial dictionary (App. F, Table 8): 'random' (per forward), 'fixed', 'learned'
            (needs ``grad='bptt'``) or 'online' (an EMA of the solved dictionaries).
        grad: 'one_step' (Eq. 13) or 'bptt' (through all K iterations, Table 1).
        eval_seed: With ``init='random'``, eval mode starts from dictionaries drawn once from a
            generator seeded with it (batch-independent evaluation; NMF's random codes too).
        eval_draws: K seeded dictionaries in eval mode; the output is the mean of the K
            reconstructions (docs/evaluation.md).
    """

    #: Distribution of a random dictionary: 'uniform' (U[0, 1)) or 'normal' (N(0, 1)).
    init_distribution: str = "normal"
    #: Whether the input must be non-negative (a ReLU precedes the ham, Sec. 2.2.2).
    nonnegative: bool = False
    #: Whether CUDA inference may replay a captured graph (:mod:`~hamseg.models.cuda_graphs`):
    #: no step may wait for the device.
    graphable: bool = True
    #: Whether the initial codes are random draws (then seeded in eval with ``eval_seed``).
    random_codes: bool = False

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
        if S < 1 or R < 1 or (D is not None and D < 1):
            raise ValueError(f"S, D and R must be positive, got S={S}, D={D}, R={R}")
        if eval_draws < 1:
            raise ValueError(f"eval_draws must be >= 1, got {eval_draws}")
        if train_steps < 0 or eval_steps < 0:
            raise ValueError(f"steps must be >= 0, got {train_steps} and {eval_steps}")
        if init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {init!r}")
        if grad not in GRADS:
            raise ValueError(f"grad must be one of {GRADS}, got {grad!r}")
        if init == "learned" and grad == "one_step":
            raise ValueError(
                "init='learned' needs grad='bptt': the one-step gradient never reaches the "
                "initial dictionary (App. F trains it with BPTT)"
            )
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
        #: The seeded dictionaries (S, D, K*R) of the last seeded evaluation, drawn once per
        #: (eval_seed, K, D, device, dtype) and kept out of the state dict (:meth:`_seeded_bases`).
        self.seeded_dictionary: Tensor | None = None
        self._seeded_for: tuple | None = None
        self.bases: Tensor | None
        if init == "learned":
            self.bases = nn.Parameter(self._draw_bases(S, D))
        elif init in ("fixed", "online"):
            self.register_buffer("bases", self._draw_bases(S, D))
        else:
            self.bases = None

    def extra_repr(self) -> str:
        names = "S D R train_steps eval_steps inv_t spatial init grad eval_seed eval_draws"
        return ", ".join(f"{k}={getattr(self, k)}" for k in names.split())

    # The algorithm, written by each subclass. x: X (B*S, D, N); bases: D (B*S, D, R); coef: C
    # (B*S, R, N), None before VQ's and CD's first step; aux: precompute(x).
    def precompute(self, x: Tensor) -> Tensor | None:
        """A quantity of X that the K steps share (None unless a subclass needs one)."""
        return None

    def init_coef(self, x: Tensor, bases: Tensor) -> Tensor | None:
        """Codes before the first step (None: the first step computes them)."""
        return None

    def local_step(
        self, x: Tensor, bases: Tensor, coef: Tensor | None, aux: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """One iteration (the loop body of Alg. 1-3); returns ``(bases, coef)``."""
        raise NotImplementedError

    def compute_coef(self, x: Tensor, bases: Tensor, coef: Tensor | None) -> Tensor:
        """The final code update, C (B*S, R, N); with the one-step gradient the only step that
        autograd records (Eq. 13)."""
        raise NotImplementedError

    # Shared machinery
    def _draw_bases(
        self,
        batch: int,
        D: int,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
        generator: torch.Generator | None = None,
        atoms: int | None = None,
    ) -> Tensor:
        """A random dictionary (batch, D, atoms or R) with unit columns (L2 along D)."""
        draw = torch.rand if self.init_distribution == "uniform" else torch.randn
        shape = (batch, D, atoms or self.R)
        return F.normalize(draw(shape, generator=generator, device=device, dtype=dtype), dim=1)

    def _fold(self, x: Tensor) -> Tensor:
        """(B, C, H, W) -> X of shape (B*S, D, N); a view when x is contiguous."""
        B, C, H, W = x.shape
        if not is_tracing() and C % self.S:  # (in a trace C is symbolic: no check)
            raise ValueError(f"channels C={C} are not divisible by S={self.S}")
        x = x.reshape(B * self.S, C // self.S, H * W)
        return x if self.spatial else x.transpose(1, 2)

    @property
    def seeded(self) -> bool:
        """Whether this call draws from ``eval_seed`` (eval mode with a seed)."""
        return not self.training and self.eval_seed is not None

    def _initial_bases(self, x: Tensor, batch: int, bases: Tensor | None, draws: int = 1) -> Tensor:
        """Initial dictionary (B*S, D, K*R) for X (B*S, D, N) in X's dtype, K = ``draws`` side by
        side; when :attr:`seeded`, :attr:`seeded_dictionary` for every sample."""
        BS, D, _ = x.shape
        if bases is not None:
            if bases.shape != (BS, D, self.R):
                raise ValueError(
                    f"bases must have shape (B*S, D, R) = {(BS, D, self.R)}, got "
                    f"{tuple(bases.shape)}"
                )
            return bases.to(x.device, x.dtype)
        if self.init != "random":
            # (S, D, R) -> (B*S, D, R)
            return self.bases.to(x.dtype).repeat(batch, 1, 1)
        if not self.seeded:
            return self._draw_bases(BS, D, x.device, x.dtype, atoms=draws * self.R)
        # (S, D, K*R) -> (B*S, D, K*R)
        return self._seeded_bases(x, draws).repeat(batch, 1, 1)

    def _seeded_bases(self, x: Tensor, draws: int = 1) -> Tensor:
        """The K = ``draws`` dictionaries that seeded evaluation starts from, side by side
        (S, D, K*R), for X (B*S, D, N): draw k of group s is the (k*S + s)-th (D, R) draw of a
        generator seeded with ``eval_seed`` on X's device. Drawn at the first call for (seed, K,
        D, device, dtype) and kept in :attr:`seeded_dictionary`: a trace or an export records it
        as a constant, and a CUDA graph's capture creates no generator
        (:mod:`~hamseg.models.cuda_graphs`)."""
        with outside_trace():  # a constant of the trace, its key plain numbers
            D = x.shape[1]
            key = (self.eval_seed, draws, D, x.device, x.dtype)
            if self._seeded_for != key:
                generator = torch.Generator(device=x.device).manual_seed(self.eval_seed)
                drawn = self._draw_bases(draws * self.S, D, x.device, x.dtype, generator)
                # (K*S, D, R) -> (K, S, D, R) -> (S, D, K, R) -> (S, D, K*R)
                drawn = drawn.reshape(draws, self.S, D, self.R).permute(1, 2, 0, 3)
                self.seeded_dictionary = drawn.reshape(self.S, D, draws * self.R)
                self._seeded_for = key
        return self.seeded_dictionary

    # The K draws side by side: D (B*S, D, K*R), C (B*S, K*R, N); draw k is atoms kR..(k+1)R-1.
    # A one-draw ham (every call K = 1) takes the plain operations, without per-draw views.
    def _softmax_per_draw(self, logits: Tensor) -> Tensor:
        """Softmax over each draw's R rows of logits (B*S, K*R, N)."""
        if self.eval_draws == 1:
            return logits.softmax(dim=1)
        return logits.reshape(-1, self.R, logits.shape[2]).softmax(dim=1).reshape(logits.shape)

    def _gram_per_draw(self, a: Tensor) -> Tensor:
        """A_k^T A_k (B*S*K, R, R) of each draw's R columns of A (B*S, M, K*R)."""
        BS, M, KR = a.shape
        if self.eval_draws > 1:  # (B*S, M, K*R) -> (B*S*K, M, R)
            a = a.reshape(BS, M, KR // self.R, self.R).transpose(1, 2).reshape(-1, M, self.R)
        return torch.bmm(a.transpose(1, 2), a)  # (B*S*K, M, R)^T @ (B*S*K, M, R)

    def _left_per_draw(self, gram: Tensor, a: Tensor) -> Tensor:
        """G_k A_k (B*S, K*R, M) for G (B*S*K, R, R) and each draw's R rows of A (B*S, K*R, M)."""
        if self.eval_draws == 1:
            return torch.bmm(gram, a)  # (B*S, R, R) @ (B*S, R, M) -> (B*S, R, M)
        # (B*S*K, R, R) @ (B*S*K, R, M) -> (B*S*K, R, M)
        return torch.bmm(gram, a.reshape(-1, self.R, a.shape[2])).reshape(a.shape)

    def _iterate(self, x: Tensor, bases: Tensor) -> tuple[Tensor, Tensor | None]:
        """The K iterations of Alg. 1-3; returns the solved ``(bases, coef)``."""
        aux = self.precompute(x)
        coef = self.init_coef(x, bases)
        for _ in range(self.train_steps if self.training else self.eval_steps):
            bases, coef = self.local_step(x, bases, coef, aux)
        return bases, coef

    @torch.no_grad()
    def _online_update(self, bases: Tensor, batch: int) -> None:
        """EMA warm start (App. F): buf <- normalize(buf + eta * (mean_batch(bases) - buf))."""
        # (B*S, D, R) -> (B, S, D, R) -> (S, D, R)
        target = bases.reshape(batch, self.S, *bases.shape[1:]).mean(dim=0)
        self.bases.lerp_(target.to(self.bases.dtype), self.eta)
        self.bases.copy_(F.normalize(self.bases, dim=1))

    def _solve(self, X: Tensor, batch: int, bases: Tensor | None) -> tuple[Tensor, Tensor]:
        """The factors of X (B*S, D, N): D (B*S, D, R) and C (B*S, R, N); with K = ``eval_draws``
        > 1 the K draws side by side, (D_1 .. D_K) / K (B*S, D, K*R) and (C_1; ..; C_K)
        (B*S, K*R, N), whose product is the mean of the K reconstructions."""
        if self.D is not None and not is_tracing() and X.shape[1] != self.D:
            raise ValueError(f"input gives D={X.shape[1]} but the module was built with D={self.D}")
        random_eval = not self.training and self.init == "random" and bases is None
        draws = self.eval_draws if random_eval else 1
        dictionary = self._initial_bases(X, batch, bases, draws)
        # Sec. 2.3: with the one-step gradient no graph for the K iterations
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.grad == "bptt"):
            dictionary, coef = self._iterate(X, dictionary)
        coef = self.compute_coef(X, dictionary, coef)
        if self.training and self.init == "online":
            self._online_update(dictionary, batch)
        if draws > 1:  # the mean of the K reconstructions: (D_1 .. D_K) / K @ (C_1; ..; C_K)
            dictionary = dictionary / draws
        return dictionary, coef

    def _decompose(self, x: Tensor, bases: Tensor | None) -> Tensor:
        """Low-rank reconstruction D C of x (B, C, H, W) in x's (>= float32) dtype."""
        dictionary, coef = self._solve(self._fold(x), x.shape[0], bases)
        # (B*S, D, R) @ (B*S, R, N) -> (B*S, D, N)
        out = torch.bmm(dictionary, coef)
        return (out if self.spatial else out.transpose(1, 2)).reshape(x.shape)

    def factorize(self, x: Tensor, bases: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The solved factors of float32/64 ``x`` instead of their product (Eq. 7: X_bar = D C),
        so that a caller can form (W D) C: D (B*S, D, R) and C (B*S, R, N) (K*R with K
        ``eval_draws``); ``bases`` as in :meth:`forward`."""
        if x.dim() != 4 or torch.finfo(x.dtype).bits < 32:
            raise ValueError(
                f"expected a float32/64 x of shape (B, C, H, W), got {x.dtype} {tuple(x.shape)}"
            )
        with torch.autocast(device_type=x.device.type, enabled=False):
            return self._solve(self._fold(x), x.shape[0], bases)

    def forward(self, x: Tensor, bases: Tensor | None = None) -> Tensor:
        """Low-rank reconstruction X_bar = D C (Eq. 7) of x (B, C, H, W), in x's shape and
        dtype, computed in float32 at least with autocast off.

        Args:
            x: Features (B, C, H, W); non-negative for NMF.
            bases: Optional initial dictionary (B*S, D, R) replacing the configured init.
        """
        if x.dim() != 4:
            raise ValueError(f"expected x of shape (B, C, H, W), got {tuple(x.shape)}")
        if cuda_graphs.applies(self, x, bases):
            return cuda_graphs.replay(self, x, self._eager)
        return self._eager(x, bases)

    def _eager(self, x: Tensor, bases: Tensor | None = None) -> Tensor:
        with torch.autocast(device_type=x.device.type, enabled=False):
            work = x.float() if torch.finfo(x.dtype).bits < 32 else x
            return self._decompose(work, bases).to(x.dtype)


@MODELS.register_module()
class NMF(MatrixDecomposition2D):
    """Non-negative matrix factorisation by multiplicative updates (Alg. 2, Eq. 9).

    min ||X - DC||_F s.t. D, C >= 0. Dictionary U[0, 1) with unit columns; codes softmax(D^T X)
    over R (App. F; inverse temperature 1, as the release: codes near 0 stall the rule) or
    U(0, 1) draws (Table 8's remark). Each step updates C, then D; after the loop one more C
    update carries the gradient.

    Args:
        inv_t: Ignored apart from a warning when it is not 1: NMF always uses 1.
        coef_init: 'softmax' (the release's) or 'uniform' (:meth:`init_coef`).
        **kwargs: See :class:`MatrixDecomposition2D`.
    """

    init_distribution = "uniform"
    nonnegative = True

    def __init__(self, inv_t: float = 1.0, coef_init: str = "softmax", **kwargs: Any) -> None:
        if inv_t != 1:
            warnings.warn(f"NMF forces inv_t to 1 (App. F, release); got {inv_t}", stacklevel=2)
        if coef_init not in COEF_INITS:
            raise ValueError(f"coef_init must be one of {COEF_INITS}, got {coef_init!r}")
        super().__init__(inv_t=1.0, **kwargs)
        self.coef_init = coef_init

    @property
    def random_codes(self) -> bool:
        return self.coef_init == "uniform"

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, coef_init={self.coef_init}"

    def init_coef(self, x: Tensor, bases: Tensor) -> Tensor | None:
        """With ``coef_init='uniform'`` U(0, 1) draws (B*S, K*R, N); in seeded evaluation one
        (S, R, N) draw of a generator seeded with ``eval_seed`` + 1 (the dictionaries' stream is
        ``eval_seed``'s), shared by the batch and the K dictionaries. None for 'softmax': the
        first step computes softmax(D^T X) from its own D^T X (:meth:`compute_coef`)."""
        if self.coef_init == "softmax":
            return None
        (BS, _, N), KR = x.shape, bases.shape[2]
        if not self.seeded:
            return torch.rand(BS, KR, N, device=x.device, dtype=x.dtype)
        generator = torch.Generator(device=x.device).manual_seed(self.eval_seed + 1)
        shared = torch.rand(self.S, self.R, N, generator=generator, device=x.device, dtype=x.dtype)
        # (S, R, N) -> (B*S, K*R, N)
        return shared.repeat(BS // self.S, KR // self.R, 1)

    def local_step(
        self, x: Tensor, bases: Tensor, coef: Tensor | None, aux: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Alg. 2: C <- C (D^T X) / (D^T D C), then D <- D (X C^T) / (D C C^T) (+ eps); the
        first step starts from softmax(D^T X) (:meth:`compute_coef`)."""
        coef = self.compute_coef(x, bases, coef)
        # (B*S, D, N) @ (B*S, K*R, N)^T -> (B*S, D, K*R)
        numer = torch.bmm(x, coef.transpose(1, 2))
        # D (C C^T) is (C C^T D^T)^T, r x r first: ((B*S*K, R, R) @ (B*S, K*R, D)) -> (B*S, D, K*R)
        codes_gram = self._gram_per_draw(coef.transpose(1, 2))
        denom = self._left_per_draw(codes_gram, bases.transpose(1, 2)).transpose(1, 2)
        return bases * numer / (denom + EPS), coef

    def compute_coef(self, x: Tensor, bases: Tensor, coef: Tensor | None) -> Tensor:
        """C <- C (D^T X) / (D^T D C + eps); without codes (the first step) C starts as
        softmax(D^T X) over R (App. F, release), from the same product D^T X."""
        # (B*S, D, K*R)^T @ (B*S, D, N) -> (B*S, K*R, N)
        numer = torch.bmm(bases.transpose(1, 2), x)
        if coef is None:  # the initial codes; constants of the one-step gradient (K = 0)
            coef = self._softmax_per_draw(numer if self.grad == "bptt" else numer.detach())
        # (D^T D) C per draw, r x r first: (B*S*K, R, R) @ (B*S, K*R, N) -> (B*S, K*R, N)
        denom = self._left_per_draw(self._gram_per_draw(bases), coef)
        # in place on the products' own outputs: no other code-sized tensor
        return numer.mul_(coef).div_(denom.add_(EPS))


class _SoftClustering(MatrixDecomposition2D):
    """What soft VQ and soft CD share: codes softmax(inv_t * cosine(D, X)) over R."""

    def precompute(self, x: Tensor) -> Tensor:
        """inv_t / ||x_n|| (as F.normalize, eps 1e-12), (B*S, 1, N), for all K steps."""
        return _column_scale(x, self.inv_t, 1e-12)

    def assign(self, x: Tensor, bases: Tensor, scale: Tensor | None = None) -> Tensor:
        """C = softmax(inv_t * cosine(D, X)) over R, (B*S, K*R, N): D_unit^T X times ``scale`` =
        inv_t / ||x_n|| (:meth:`precompute`)."""
        scale = self.precompute(x) if scale is None else scale
        # (B*S, D, K*R)^T @ (B*S, D, N) -> (B*S, K*R, N)
        logits = torch.bmm(F.normalize(bases, dim=1, eps=EPS).transpose(1, 2), x)
        return self._softmax_per_draw(logits * scale)


def _column_scale(x: Tensor, inv_t: float, eps: float) -> Tensor:
    """inv_t / max(||x_n||, eps) for every column x_n of X (B*S, D, N), as (B*S, 1, N)."""
    # sqrt(max(sum of squares, eps^2)): a zero, not an infinite, gradient at x_n = 0
    return inv_t / x.square().sum(dim=1, keepdim=True).clamp_min(eps * eps).sqrt()


@MODELS.register_module()
class VQ(_SoftClustering):
    """Soft vector quantisation (Alg. 1, Eq. 8), a differentiable soft K-means; the final codes
    (with gradient) softmax(inv_t * cosine(D, X)); T -> 0 gives one-hot codes.

    Args:
        **kwargs: See :class:`MatrixDecomposition2D` (inv_t 100; the release: 10 to 100).
    """

    def local_step(
        self, x: Tensor, bases: Tensor, coef: Tensor | None, aux: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Alg. 1: C <- softmax(inv_t cosine(D, X)), D <- X C^T diag(C 1_n)^-1 (eps 1e-6)."""
        coef = self.assign(x, bases, aux)
        # (B*S, D, N) @ (B*S, K*R, N)^T -> (B*S, D, K*R), column r over sum_n C_rn: cluster means
        return torch.bmm(x, coef.transpose(1, 2)) / (coef.sum(dim=2).unsqueeze(1) + EPS), coef

    def compute_coef(self, x: Tensor, bases: Tensor, coef: Tensor | None) -> Tensor:
        """softmax(inv_t * cosine(D, X)), with gradient through ||x|| too (eps 1e-6; the release
        detaches ||x|| here)."""
        return self.assign(x, bases, _column_scale(x, self.inv_t, EPS))


@MODELS.register_module()
class CD(_SoftClustering):
    """Soft concept decomposition (Alg. 3, Eq. 14-15, App. B), a soft spherical K-means; the
    final codes (with gradient) solve the ridge problem C = (D^T D + beta I)^-1 D^T X
    (:mod:`hamseg.models.ridge_solve`, exportable).

    Args:
        beta: Ridge weight (paper: 0.01 and 0.1 alike; release 0.1).
        **kwargs: See :class:`MatrixDecomposition2D` (inv_t 100; Table 9: 10 and 100 best).
    """

    #: ``torch.linalg.solve`` checks its result on the host: no CUDA graph.
    graphable = False

    def __init__(self, beta: float = 0.1, **kwargs: Any) -> None:
        if beta <= 0:
            raise ValueError(f"beta must be > 0 (it makes D^T D + beta I invertible), got {beta}")
        super().__init__(**kwargs)
        self.beta = beta

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, beta={self.beta}"

    def local_step(
        self, x: Tensor, bases: Tensor, coef: Tensor | None, aux: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Alg. 3: C <- softmax(inv_t cosine(D, X)), D <- normalize(X C^T)."""
        coef = self.assign(x, bases, aux)
        # (B*S, D, N) @ (B*S, K*R, N)^T -> (B*S, D, K*R), unit columns
        return F.normalize(torch.bmm(x, coef.transpose(1, 2)), dim=1, eps=EPS), coef

    def compute_coef(self, x: Tensor, bases: Tensor, coef: Tensor | None) -> Tensor:
        """C = (D^T D + beta I)^-1 D^T X."""
        ridge = torch.eye(self.R, device=x.device, dtype=x.dtype) * self.beta
        # D_k^T D_k (B*S*K, R, R) + beta I out of place: an ONNX export loses an in-place write
        # into a view such as the diagonal
        gram = self._gram_per_draw(bases) + ridge
        # (B*S, D, K*R)^T @ (B*S, D, N) -> (B*S, K*R, N) -> (B*S*K, R, N)
        rhs = torch.bmm(bases.transpose(1, 2), x)
        # (B*S*K, R, R)^-1 @ (B*S*K, R, N) -> (B*S*K, R, N) -> (B*S, K*R, N)
        return ridge_solve(gram, rhs.reshape(-1, self.R, rhs.shape[2])).reshape(rhs.shape)
