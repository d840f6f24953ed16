"""Matrix decompositions, the "hams" of Hamburger: NMF, CD and VQ.

Geng et al., "Is Attention Better Than Matrix Decomposition?", ICLR 2021: Sec. 2.2.2 (Alg. 1 soft
VQ, Alg. 2 NMF with multiplicative updates), App. B (Alg. 3 soft CD), Sec. 2.3 (one-step
gradient, Eq. 13) and App. F (dictionary initialisation, temperature, number of steps K).

Notation: an input feature map (B, C, H, W) is folded into B*S matrices X of shape (D, N); the
dictionary ("bases") D has shape (D, R) and the codes ("coef") C are stored transposed, shape
(N, R), so that the low-rank reconstruction is ``bases @ coef^T`` (Eq. 7). Where the paper is
silent the authors' release (Gsunshine/Enjoy-Hamburger, seg/HamNet) is followed: the update order,
eps = 1e-6, the NMF code initialisation and the extra code update with gradient after the loop.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from mmseg.registry import MODELS
from torch import Tensor, nn

from hamseg.models.ridge_solve import ridge_solve
from hamseg.models.tracing import is_tracing, outside_trace

__all__ = ["MatrixDecomposition2D", "NMF", "CD", "VQ"]

#: Added to every denominator of an update, as in the authors' release.
EPS = 1e-6

INITS = ("random", "fixed", "learned", "online")
COEF_INITS = ("softmax", "uniform")
GRADS = ("one_step", "bptt")


@dataclass
class _NMFBuffers:
    """Memory reused by the K in-place NMF steps (see :meth:`NMF.precompute`)."""

    numer: Tensor | None  # (B*S, N, R), D^T X
    denom: Tensor | None  # (B*S, N, R), D^T D C
    numer_d: Tensor | None  # (B*S, D, R), X C^T
    denom_d: Tensor | None  # (B*S, D, R), D C C^T
    #: ``numer`` already holds D^T X for the current D (the initial codes' logits).
    numer_ready: bool = False
    #: No preallocated memory (a trace or an export records the steps): the products are
    #: fresh tensors (no ``out=``), the updates still in place and the logits still reused.
    plain: bool = False


class MatrixDecomposition2D(nn.Module):
    """Shared machinery of the hams: folding, dictionary init, the K-step loop, dtype guard.

    Subclasses implement one iteration (:meth:`local_step`) and the final code update that
    carries the gradient (:meth:`compute_coef`); everything else lives here once.

    Args:
        S: Number of groups; the C channels are split into S independent decompositions.
        D: Latent (column) dimension of X. Spatial folding: C // S; channel folding: H * W.
            Required for ``init`` in {'fixed', 'learned', 'online'} (the dictionary is built at
            construction); otherwise optional and, if given, checked against the input.
        R: Rank, the number of dictionary atoms (paper r = 64 for segmentation).
        train_steps: Iterations K in training mode.
        eval_steps: Iterations K in eval mode. App. F recommends the same K for both.
        inv_t: Inverse temperature 1 / T of the softmax codes (Alg. 1, 3; Table 9).
        eta: Step of the exponential moving average for ``init='online'``.
        spatial: Spatial folding, X = (C/S) x (H*W), if True; channel folding, X = (H*W) x (C/S),
            if False.
        init: Initial dictionary (App. F, Table 8): 'random' (drawn at every forward, the
            default and the best in the paper), 'fixed' (drawn once at construction, never
            updated), 'learned' (an ``nn.Parameter``, needs ``grad='bptt'``) or 'online' (warm
            start from a buffer updated by an EMA of the solved dictionaries after every
            training forward).
        grad: 'one_step' (Sec. 2.3, Eq. 13: the K iterations run without autograd, the gradient
            flows only through the final code update and the reconstruction) or 'bptt'
            (back-propagation through all K iterations, Table 1 ablation).
        eval_seed: If not None and ``init='random'``, the dictionary in eval mode is drawn from a
            ``torch.Generator`` seeded with this value (one draw of shape (S, D, R) shared by all
            samples), so evaluation is deterministic and independent of the batch composition;
            random initial codes (NMF's ``coef_init='uniform'``) come next from the same
            generator.
        eval_draws: In eval mode with ``init='random'``, the number K of dictionaries drawn
            (all seeded by ``eval_seed``); the ham's output is the mean of the K
            reconstructions, (1/K) sum_k D_k C_k (Eq. 7 averaged), a deterministic estimate of
            the expected reconstruction over the draws the model was trained under. 1: one draw.

    Raises:
        ValueError: On an unknown option, on ``init`` needing ``D`` without it, and on
            ``init='learned'`` with ``grad='one_step'``.
    """

    #: Distribution of a random initial dictionary: 'uniform' (U[0, 1)) or 'normal' (N(0, 1)).
    init_distribution: str = "normal"
    #: Whether the loop starts from codes softmax(inv_t * X^T D) (NMF, App. F) or needs none.
    uses_initial_coef: bool = False
    #: Whether the input must be non-negative (a ReLU has to precede the ham, Sec. 2.2.2).
    nonnegative: bool = False

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
                "init='learned' needs grad='bptt': with the one-step gradient the K iterations "
                "run without autograd and the solved dictionary is a constant in backward, so a "
                "learned initial dictionary would never receive a gradient (it is only reached "
                "through the unrolled iterations; paper App. F trains it with BPTT)."
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

        self.bases: Tensor | None
        if init == "learned":
            self.bases = nn.Parameter(self._draw_bases(S, D))
        elif init in ("fixed", "online"):
            self.register_buffer("bases", self._draw_bases(S, D))
        else:
            self.bases = None

    def extra_repr(self) -> str:
        fold = "spatial" if self.spatial else "channel"
        return (
            f"S={self.S}, D={self.D}, R={self.R}, train_steps={self.train_steps}, "
            f"eval_steps={self.eval_steps}, inv_t={self.inv_t}, fold={fold}, init={self.init}, "
            f"grad={self.grad}, eval_seed={self.eval_seed}, eval_draws={self.eval_draws}"
        )

    # ----------------------------------------------------------------------------------------
    # The algorithm: subclass hooks
    # ----------------------------------------------------------------------------------------
    def precompute(self, x: Tensor, inplace: bool = False) -> Any:
        """What the K steps share: a loop-invariant quantity of X, or buffers that the in-place
        steps reuse instead of allocating at every step (None unless a subclass needs one).

        Args:
            x: X, (B*S, D, N).
            inplace: Whether the steps will run in place (without autograd).
        """
        return None

    def local_step(
        self,
        x: Tensor,
        bases: Tensor,
        coef: Tensor | None,
        aux: Any = None,
        inplace: bool = False,
    ) -> tuple[Tensor, Tensor]:
        """One iteration of the algorithm (the loop body of Alg. 1-3).

        Args:
            x: X, (B*S, D, N).
            bases: Dictionary, (B*S, D, R).
            coef: Codes transposed, (B*S, N, R), or None before the first step of VQ/CD.
            aux: What :meth:`precompute` returned for ``x``.
            inplace: Whether ``bases`` and ``coef`` may be overwritten (only without autograd).

        Returns:
            The updated ``(bases, coef)``.
        """
        raise NotImplementedError

    def compute_coef(self, x: Tensor, bases: Tensor, coef: Tensor | None) -> Tensor:
        """Final code update after the loop; with the one-step gradient the only differentiable
        step (Eq. 13), ``bases`` and ``coef`` being constants.

        Args:
            x: X, (B*S, D, N).
            bases: Solved dictionary, (B*S, D, R).
            coef: Codes of the last iteration, (B*S, N, R), or None if no step ran (VQ/CD).

        Returns:
            Codes transposed, (B*S, N, R).
        """
        raise NotImplementedError

    # ----------------------------------------------------------------------------------------
    # Shared machinery
    # ----------------------------------------------------------------------------------------
    def init_coef(
        self,
        x: Tensor,
        bases: Tensor,
        aux: Any = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Initial codes softmax(inv_t * X^T D) over R (release; App. F for NMF).

        As in the release, X is not normalised (the paper writes cosine(D, X)); the dictionary
        columns are unit vectors from the initialisation.

        Args:
            x: X, (B*S, D, N).
            bases: Initial dictionary, (B*S, D, R).
            aux: What :meth:`precompute` returned for ``x`` (unused here).
            generator: The seeded evaluation generator (:meth:`_eval_generator`) for a random
                initialisation, or None (unused here).
        """
        # (B*S, D, N)^T @ (B*S, D, R) -> (B*S, N, R)
        logits = torch.bmm(x.transpose(1, 2), bases)
        if self.inv_t != 1.0:
            logits.mul_(self.inv_t)  # bmm does not save its output: safe under autograd
        return logits.softmax(dim=-1)

    def _draw_bases(
        self,
        batch: int,
        D: int,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """A random dictionary (batch, D, R) with unit columns (L2 along D)."""
        draw = torch.rand if self.init_distribution == "uniform" else torch.randn
        bases = draw((batch, D, self.R), generator=generator, device=device, dtype=dtype)
        return F.normalize(bases, dim=1)

    def _fold(self, x: Tensor) -> Tensor:
        """(B, C, H, W) -> X of shape (B*S, D, N); a view when x is contiguous."""
        B, C, H, W = x.shape
        if C % self.S:
            raise ValueError(f"channels C={C} are not divisible by S={self.S}")
        x = x.reshape(B * self.S, C // self.S, H * W)
        return x if self.spatial else x.transpose(1, 2)

    def _unfold(self, x: Tensor, shape: torch.Size) -> Tensor:
        """Inverse of :meth:`_fold`: (B*S, D, N) -> (B, C, H, W)."""
        return x.reshape(shape) if self.spatial else x.transpose(1, 2).reshape(shape)

    def _eval_generator(self, device: torch.device) -> torch.Generator | None:
        """A generator seeded with ``eval_seed`` in eval mode (one per forward, so evaluation
        is deterministic), or None (training, or no ``eval_seed``: the global RNG)."""
        if self.training or self.eval_seed is None:
            return None
        gen = torch.Generator(device=device)
        gen.manual_seed(self.eval_seed)
        return gen

    def _initial_bases(
        self,
        x: Tensor,
        batch: int,
        bases: Tensor | None,
        inplace: bool = True,
        generator: torch.Generator | None = None,
        draws: int = 1,
    ) -> Tensor:
        """Initial dictionary (K*B*S, D, R) for X of shape (K*B*S, D, N), in X's dtype.

        In-place updates (``inplace``) need a tensor owned by this call, so a given ``bases``
        is then copied; buffers are always tiled with ``repeat`` (a copy). With a
        ``generator`` (seeded evaluation) a random dictionary is K (S, D, R) draws, each
        shared by all samples (``draws`` = K, the ensemble of :attr:`eval_draws`).
        """
        BS, D, _ = x.shape
        if bases is not None:
            if bases.shape != (BS, D, self.R):
                raise ValueError(
                    f"bases must have shape (B*S, D, R) = {(BS, D, self.R)}, got "
                    f"{tuple(bases.shape)}"
                )
            return bases.to(x.device, x.dtype, copy=inplace)
        if self.init != "random":
            # (S, D, R) -> (B*S, D, R)
            return self.bases.to(x.dtype).repeat(batch, 1, 1)
        if generator is not None:
            shared = self._seeded_bases(D, x, generator, draws)
            # (K, S, D, R) -> (K, B, S, D, R) -> (K*B*S, D, R), a copy
            return shared.unsqueeze(1).repeat(1, batch, 1, 1, 1).reshape(BS, D, self.R)
        return self._draw_bases(BS, D, x.device, x.dtype)

    def _seeded_bases(
        self, D: int, x: Tensor, generator: torch.Generator, draws: int = 1
    ) -> Tensor:
        """The K seeded evaluation dictionaries (K, S, D, R), drawn once per (seed, K, D, device,
        dtype)
        and kept (not in the state dict): a pure function of those, so a trace or an export
        records it as a constant and every call of the graph computes what eager evaluation
        computes. ``generator`` is left where the draw leaves it (random initial codes come
        next from it)."""
        key = (self.eval_seed, draws, D, x.device, x.dtype)
        cached = self.__dict__.get("_seeded")
        if cached is None or cached[0] != key:
            with outside_trace():  # a constant of the trace, not a random operator
                shared = self._draw_bases(draws * self.S, D, x.device, x.dtype, generator)
                shared = shared.reshape(draws, self.S, D, self.R)
                cached = (key, shared, generator.get_state())
            self.__dict__["_seeded"] = cached
        else:
            generator.set_state(cached[2])
        return cached[1]

    def _iterate(
        self,
        x: Tensor,
        bases: Tensor,
        inplace: bool,
        generator: torch.Generator | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """The K iterations of Alg. 1-3; returns the solved ``(bases, coef)``."""
        aux = self.precompute(x, inplace)
        coef = self.init_coef(x, bases, aux, generator) if self.uses_initial_coef else None
        for _ in range(self.train_steps if self.training else self.eval_steps):
            bases, coef = self.local_step(x, bases, coef, aux, inplace)
        return bases, coef

    @torch.no_grad()
    def _online_update(self, bases: Tensor, batch: int) -> None:
        """EMA warm start (App. F): buf <- normalize(buf + eta * (mean_batch(bases) - buf))."""
        # (B*S, D, R) -> (B, S, D, R) -> (S, D, R)
        target = bases.reshape(batch, self.S, *bases.shape[1:]).mean(dim=0)
        self.bases.lerp_(target.to(self.bases.dtype), self.eta)
        self.bases.copy_(F.normalize(self.bases, dim=1))

    def _solve(self, X: Tensor, batch: int, bases: Tensor | None) -> tuple[Tensor, Tensor]:
        """The solved factors of X (B*S, D, N): dictionary (B*S, D, R) and codes (B*S, N, R).

        With the one-step gradient only the final code update is recorded by autograd; in
        training with ``init='online'`` the warm-start buffer is updated here.
        """
        if self.D is not None and X.shape[1] != self.D:
            raise ValueError(f"input gives D={X.shape[1]} but the module was built with D={self.D}")
        draws = self._draws(bases)
        if draws > 1:  # the K decompositions of every X side by side in the batch
            # (B*S, D, N) -> (K*B*S, D, N)
            X = X.repeat(draws, 1, 1)
        # Sec. 2.3: with the one-step gradient no graph for the K iterations (bases and coef are
        # constants in backward); without autograd (inference) BPTT computes the same.
        inplace = self.grad == "one_step" or not torch.is_grad_enabled()
        generator = self._eval_generator(X.device)  # the dictionary's draw, then the codes'
        dictionary = self._initial_bases(X, batch, bases, inplace, generator, draws)
        if inplace:
            with torch.no_grad():
                dictionary, coef = self._iterate(X, dictionary, True, generator)
        else:
            dictionary, coef = self._iterate(X, dictionary, False, generator)
        coef = self.compute_coef(X, dictionary, coef)
        if self.training and self.init == "online":
            self._online_update(dictionary, batch)
        if draws > 1:
            # (K*B*S, D, R) -> (B*S, D, K*R), and the codes alike: the mean of the K
            # reconstructions is the one product (D_1 .. D_K) / K @ (C_1 .. C_K)^T
            dictionary, coef = _side_by_side(dictionary, draws) / draws, _side_by_side(coef, draws)
        return dictionary, coef

    def _draws(self, bases: Tensor | None) -> int:
        """K of :attr:`eval_draws` where it applies (eval mode, random init, no given bases)."""
        if self.training or self.init != "random" or bases is not None:
            return 1
        return self.eval_draws

    def _decompose(self, x: Tensor, bases: Tensor | None, reuse_input: bool = False) -> Tensor:
        """Low-rank reconstruction D C of x (B, C, H, W), computed in x's (>= float32) dtype.

        With ``reuse_input`` (honoured only without autograd and with spatial folding) the
        reconstruction is written over x, which the K steps no longer need.
        """
        X = self._fold(x)  # (B*S, D, N)
        dictionary, coef = self._solve(X, x.shape[0], bases)
        overwrite = (
            reuse_input and self.spatial and not torch.is_grad_enabled() and not is_tracing()
        )
        # (B*S, D, R) @ (B*S, N, R)^T -> (B*S, D, N)
        out = torch.bmm(dictionary, coef.transpose(1, 2), out=X if overwrite else None)
        return self._unfold(out, x.shape)

    def factorize(self, x: Tensor, bases: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The solved factors instead of their product (Eq. 7: X_bar = D C).

        A caller that multiplies the reconstruction by a matrix W (e.g. the upper bread, a 1x1
        conv) can form (W D) C instead of W (D C): with spatial folding that costs C_out D r +
        C_out r N MACs instead of D r N + C_out D N (Hamburger's inference path does this).

        Args:
            x: Features (B, C, H, W), float32 or float64 (no cast is done here).
            bases: Optional initial dictionary (B*S, D, R), as in :meth:`forward`.

        Returns:
            ``(dictionary, coef)``: (B*S, D, R) and the codes transposed (B*S, N, R), in the
            folded layout of :meth:`_fold`; ``dictionary @ coef^T`` is :meth:`forward`'s result
            folded.
        """
        if x.dim() != 4 or torch.finfo(x.dtype).bits < 32:
            raise ValueError(
                f"expected a float32/64 x of shape (B, C, H, W), got {x.dtype} {tuple(x.shape)}"
            )
        with torch.autocast(device_type=x.device.type, enabled=False):
            return self._solve(self._fold(x), x.shape[0], bases)

    def forward(self, x: Tensor, bases: Tensor | None = None, reuse_input: bool = False) -> Tensor:
        """Low-rank reconstruction X_bar = D C of x (Eq. 7).

        The decomposition always runs in at least float32 with autocast disabled: half / bfloat16
        inputs are cast up and the output is cast back, so mixed precision cannot overflow or
        divide by zero inside the iterations. A float32 input is used as is (no copy).

        Args:
            x: Features (B, C, H, W), any H and W; non-negative for NMF.
            bases: Optional initial dictionary (B*S, D, R) replacing the configured init (e.g.
                for reproducibility or analysis). It is never modified.
            reuse_input: Allow the reconstruction to be written over ``x`` (saves allocating
                an output as large as ``x``); the caller must not use ``x`` afterwards. Honoured
                only without autograd and with spatial folding.

        Returns:
            The reconstruction, same shape and dtype as ``x``.
        """
        if x.dim() != 4:
            raise ValueError(f"expected x of shape (B, C, H, W), got {tuple(x.shape)}")
        with torch.autocast(device_type=x.device.type, enabled=False):
            work = x.float() if torch.finfo(x.dtype).bits < 32 else x
            # A cast copy is this call's own memory: it can always take the reconstruction.
            out = self._decompose(work, bases, reuse_input or work is not x)
        return out.to(x.dtype)


@MODELS.register_module()
class NMF(MatrixDecomposition2D):
    """Non-negative matrix factorisation by multiplicative updates (Alg. 2, Eq. 9).

    min ||X - DC||_F s.t. D, C >= 0 (Lee & Seung). Random dictionary U[0, 1) with unit columns,
    codes initialised as softmax(X^T D) over R (App. F; inverse temperature forced to 1, as in
    the release, since codes close to 0 stall the multiplicative rule), or drawn from U(0, 1)
    (App. F, Table 8's remark: 77.8(77.6)). Each step updates C then D; after the loop one more
    C update carries the gradient.

    Args:
        inv_t: Ignored apart from a warning when it is not 1: NMF always uses 1.
        coef_init: Initial codes: 'softmax' (softmax(X^T D), the release's) or 'uniform'
            (C_ij ~ U(0, 1); with ``eval_seed`` drawn from the seeded generator in eval mode,
            one (S, N, R) draw shared by all samples).
        **kwargs: See :class:`MatrixDecomposition2D`.

    Raises:
        ValueError: On an unknown ``coef_init`` (and see :class:`MatrixDecomposition2D`).
    """

    init_distribution = "uniform"
    uses_initial_coef = True
    nonnegative = True

    def __init__(self, inv_t: float = 1.0, coef_init: str = "softmax", **kwargs: Any) -> None:
        if inv_t != 1:
            warnings.warn(f"NMF forces inv_t to 1 (App. F, release); got {inv_t}", stacklevel=2)
        if coef_init not in COEF_INITS:
            raise ValueError(f"coef_init must be one of {COEF_INITS}, got {coef_init!r}")
        super().__init__(inv_t=1.0, **kwargs)
        self.coef_init = coef_init

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, coef_init={self.coef_init}"

    def init_coef(
        self,
        x: Tensor,
        bases: Tensor,
        aux: _NMFBuffers | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Initial codes softmax(X^T D) (App. F, release), or U(0, 1) draws (``coef_init``).

        With the in-place buffers the logits X^T D are written into ``aux.numer``: they are
        also the numerator of the first code update (same D), which then skips that product
        (one d x n x r product less).
        """
        if self.coef_init == "uniform":
            BS, _, N = x.shape
            if generator is None:
                return torch.rand(BS, N, self.R, device=x.device, dtype=x.dtype)
            shared = torch.rand(
                self.S, N, self.R, generator=generator, device=x.device, dtype=x.dtype
            )
            # (S, N, R) -> (B*S, N, R)
            return shared.repeat(BS // self.S, 1, 1)
        if aux is None:
            return super().init_coef(x, bases)
        # (B*S, D, N)^T @ (B*S, D, R) -> (B*S, N, R)
        logits = torch.bmm(x.transpose(1, 2), bases, out=None if aux.plain else aux.numer)
        aux.numer, aux.numer_ready = logits, True
        return logits.softmax(dim=-1)

    def precompute(self, x: Tensor, inplace: bool = False) -> _NMFBuffers | None:
        """Buffers for the in-place steps: every step then writes its four products into the
        same memory instead of allocating (and page-faulting) eight new tensors."""
        if not inplace:
            return None
        if is_tracing():  # recorded ops: no out= arguments (see _NMFBuffers.plain)
            return _NMFBuffers(None, None, None, None, plain=True)
        BS, D, N = x.shape
        return _NMFBuffers(
            x.new_empty(BS, N, self.R),
            x.new_empty(BS, N, self.R),
            x.new_empty(BS, D, self.R),
            x.new_empty(BS, D, self.R),
        )

    @staticmethod
    def _coef_update(
        x: Tensor, bases: Tensor, coef: Tensor, buffers: _NMFBuffers | None = None
    ) -> Tensor:
        """C <- C * (D^T X) / (D^T D C + eps), in the transposed layout coef = C^T.

        With ``buffers`` the update is done in place on ``coef`` (no autograd). The r x r Gram
        D^T D is formed first: (D^T D) C costs N r^2, D^T (D C) would cost 2 N D r.
        """
        numer_out, denom_out = (
            (buffers.numer, buffers.denom) if buffers and not buffers.plain else (None, None)
        )
        # (B*S, D, R)^T @ (B*S, D, R) -> (B*S, R, R)
        gram = torch.bmm(bases.transpose(1, 2), bases)
        if buffers is not None and buffers.numer_ready:
            numer, buffers.numer_ready = buffers.numer, False  # the initial codes' logits
        else:
            # (B*S, D, N)^T @ (B*S, D, R) -> (B*S, N, R)
            numer = torch.bmm(x.transpose(1, 2), bases, out=numer_out)
        # (B*S, N, R) @ (B*S, R, R) -> (B*S, N, R)
        denom = torch.bmm(coef, gram, out=denom_out)
        if buffers is not None:
            return coef.mul_(numer.div_(denom.add_(EPS)))
        return coef * numer / (denom + EPS)

    @staticmethod
    def _bases_update(
        x: Tensor, bases: Tensor, coef: Tensor, buffers: _NMFBuffers | None = None
    ) -> Tensor:
        """D <- D * (X C^T) / (D C C^T + eps); in place on ``bases`` with ``buffers``.

        The r x r Gram C C^T is formed first: D (C C^T) costs D r^2, (D C) C^T would cost
        2 D N r.
        """
        numer_out, denom_out = (
            (buffers.numer_d, buffers.denom_d) if buffers and not buffers.plain else (None, None)
        )
        # (B*S, D, N) @ (B*S, N, R) -> (B*S, D, R)
        numer = torch.bmm(x, coef, out=numer_out)
        # (B*S, N, R)^T @ (B*S, N, R) -> (B*S, R, R)
        gram = torch.bmm(coef.transpose(1, 2), coef)
        # (B*S, D, R) @ (B*S, R, R) -> (B*S, D, R)
        denom = torch.bmm(bases, gram, out=denom_out)
        if buffers is not None:
            return bases.mul_(numer.div_(denom.add_(EPS)))
        return bases * numer / (denom + EPS)

    def local_step(
        self,
        x: Tensor,
        bases: Tensor,
        coef: Tensor | None,
        aux: _NMFBuffers | None = None,
        inplace: bool = False,
    ) -> tuple[Tensor, Tensor]:
        """Alg. 2 loop body: the C update, then D <- D * (X C^T) / (D C C^T + eps)."""
        buffers = (aux or self.precompute(x, True)) if inplace else None
        coef = self._coef_update(x, bases, coef, buffers)
        return self._bases_update(x, bases, coef, buffers), coef

    def compute_coef(self, x: Tensor, bases: Tensor, coef: Tensor | None) -> Tensor:
        """One more multiplicative C update, with gradient (release).

        With autograd on and neither the dictionary nor the codes carrying a gradient (the
        one-step gradient) the factor C / (D^T D C + eps) is a constant: it is computed without
        autograd, and the gradient-carrying part is one product (D^T X) * factor, computed in
        the (R, N) layout: autograd then records one bmm and one multiplication, saves one
        code-sized tensor, and its gradient for X comes out in X's own (D, N) layout. Without
        autograd the plain update runs, in the (N, R) layout (X^T D is the faster product).

        Returns:
            Codes transposed, (B*S, N, R); a view of an (B*S, R, N) tensor on the one-step
            gradient path.
        """
        if bases.requires_grad or coef.requires_grad or not torch.is_grad_enabled() or is_tracing():
            # Without autograd (inference) the (N, R) layout: X^T D is the faster product; a
            # trace or an export records the plain ops of that layout too.
            return self._coef_update(x, bases, coef)
        with torch.no_grad():
            # (B*S, D, R)^T @ (B*S, D, R) -> (B*S, R, R)
            gram = torch.bmm(bases.transpose(1, 2), bases)
            # (B*S, R, R) @ (B*S, N, R)^T -> (B*S, R, N); D^T D is symmetric: (C D^T D)^T
            factor = torch.bmm(gram, coef.transpose(1, 2)).add_(EPS)
            factor = torch.div(coef.transpose(1, 2), factor, out=factor)
        # (B*S, D, R)^T @ (B*S, D, N) -> (B*S, R, N); bmm does not save its output, so the
        # in-place product is safe under autograd.
        return torch.bmm(bases.transpose(1, 2), x).mul_(factor).transpose(1, 2)


def _side_by_side(factor: Tensor, draws: int) -> Tensor:
    """(K*B*S, M, R) -> (B*S, M, K*R): the K draws' factors of each matrix, side by side."""
    KBS, M, R = factor.shape
    # (K, B*S, M, R) -> (B*S, M, K, R) -> (B*S, M, K*R)
    return factor.reshape(draws, KBS // draws, M, R).permute(1, 2, 0, 3).reshape(-1, M, draws * R)


def _column_scale(x: Tensor, inv_t: float, eps: float) -> Tensor:
    """inv_t / max(||x_n||, eps) for every column x_n of X (B*S, D, N), as (B*S, N, 1).

    The cosine's normalisation of X, applied to the (N, R) logits, X^T D / ||x||, instead of
    to X itself: D times fewer divisions and no copy of X (the products are the same).
    """
    # (B*S, D, N) -> (B*S, N): sum over D of x^2; sqrt(max(., eps^2)) = max(||x_n||, eps),
    # with a zero (not an infinite) gradient at x_n = 0
    norm = x.square().sum(dim=1).clamp_min(eps * eps).sqrt()
    return (inv_t / norm).unsqueeze(-1)


def _soft_assign(x: Tensor, scale: Tensor, bases: Tensor, inplace: bool) -> Tensor:
    """softmax(inv_t * cosine(D, X)) over R, then each code normalised over N.

    The second step is the diag(C 1_n)^-1 of Alg. 1 (eps 1e-6 as in the release), so that
    X @ coef is the (soft) mean of the points assigned to each atom.

    Args:
        x: X, (B*S, D, N).
        scale: inv_t / ||x_n|| per column (:func:`_column_scale`), (B*S, N, 1).
        bases: Dictionary, (B*S, D, R); normalised here for the cosine.
        inplace: Whether the softmax output may be overwritten (only without autograd).

    Returns:
        Codes transposed, (B*S, N, R), columns summing to ~1 over N.
    """
    bases_unit = F.normalize(bases, dim=1, eps=EPS)
    # (B*S, D, N)^T @ (B*S, D, R) -> (B*S, N, R), then the column norms of X and 1/T
    logits = torch.bmm(x.transpose(1, 2), bases_unit).mul_(scale)
    coef = logits.softmax(dim=-1)
    mass = coef.sum(dim=1, keepdim=True).add_(EPS)  # (B*S, 1, R)
    return coef.div_(mass) if inplace else coef / mass


class _SoftClustering(MatrixDecomposition2D):
    """Common part of soft VQ and soft CD: normal random init, cosine-softmax assignments."""

    def precompute(self, x: Tensor, inplace: bool = False) -> Tensor:
        """inv_t / ||x_n|| for the cosine (as F.normalize, eps 1e-12), once for all K steps."""
        return _column_scale(x, self.inv_t, 1e-12)

    def _assign(self, x: Tensor, bases: Tensor, aux: Tensor | None, inplace: bool) -> Tensor:
        scale = aux if aux is not None else self.precompute(x)
        return _soft_assign(x, scale, bases, inplace)


@MODELS.register_module()
class VQ(_SoftClustering):
    """Soft vector quantisation (Alg. 1, Eq. 8): a differentiable soft K-means.

    Each step: C <- softmax(inv_t * cosine(D, X)) over R, D <- X C^T diag(C 1_n)^-1. The final
    codes, with gradient, are softmax(inv_t * cosine(D, X)); T -> 0 gives hard one-hot codes.

    Args:
        **kwargs: See :class:`MatrixDecomposition2D` (inv_t defaults to 100; the release README
            recommends 10 to 100).
    """

    def local_step(
        self,
        x: Tensor,
        bases: Tensor,
        coef: Tensor | None,
        aux: Tensor | None = None,
        inplace: bool = False,
    ) -> tuple[Tensor, Tensor]:
        """Alg. 1 loop body."""
        coef = self._assign(x, bases, aux, inplace)
        # (B*S, D, N) @ (B*S, N, R) -> (B*S, D, R)
        return torch.bmm(x, coef), coef

    def compute_coef(self, x: Tensor, bases: Tensor, coef: Tensor | None) -> Tensor:
        """Codes softmax(inv_t * cosine(D, X)) over R, with gradient.

        The gradient goes through the full cosine, including the norms of X (the release
        detaches ||x|| in this step).
        """
        bases_unit = F.normalize(bases, dim=1, eps=EPS)
        # (B*S, D, N)^T @ (B*S, D, R) -> (B*S, N, R); cosine: divided by ||x_n|| (eps 1e-6)
        logits = torch.bmm(x.transpose(1, 2), bases_unit) * _column_scale(x, self.inv_t, EPS)
        return logits.softmax(dim=-1)


@MODELS.register_module()
class CD(_SoftClustering):
    """Soft concept decomposition (Alg. 3, Eq. 14-15, App. B).

    Each step: C <- softmax(inv_t * cosine(D, X)), D <- normalize(X C^T) (unit columns, a soft
    spherical K-means). The final codes, with gradient, solve the ridge problem in closed form,
    C = (D^T D + beta I)^-1 D^T X, by a linear solve (:mod:`hamseg.models.ridge_solve`: LU
    eagerly, an exportable elimination while a graph is recorded).

    Args:
        beta: Ridge weight (paper: 0.01 or 0.1 make no difference; release 0.1).
        **kwargs: See :class:`MatrixDecomposition2D` (inv_t defaults to 100; Table 9 shows
            T = 0.1 and 0.01, i.e. inv_t 10 and 100, as the best).
    """

    def __init__(self, beta: float = 0.1, **kwargs: Any) -> None:
        if beta <= 0:
            raise ValueError(f"beta must be > 0 (it makes D^T D + beta I invertible), got {beta}")
        super().__init__(**kwargs)
        self.beta = beta

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, beta={self.beta}"

    def local_step(
        self,
        x: Tensor,
        bases: Tensor,
        coef: Tensor | None,
        aux: Tensor | None = None,
        inplace: bool = False,
    ) -> tuple[Tensor, Tensor]:
        """Alg. 3 loop body."""
        coef = self._assign(x, bases, aux, inplace)
        # (B*S, D, N) @ (B*S, N, R) -> (B*S, D, R)
        bases = F.normalize(torch.bmm(x, coef), dim=1, eps=EPS)
        return bases, coef

    def compute_coef(self, x: Tensor, bases: Tensor, coef: Tensor | None) -> Tensor:
        """C = (D^T D + beta I)^-1 D^T X, returned transposed as (B*S, N, R)."""
        ridge = torch.eye(self.R, device=x.device, dtype=x.dtype).mul_(self.beta)
        # (B*S, D, R)^T @ (B*S, D, R) -> (B*S, R, R), + beta I out of place: a recorded graph
        # (ONNX export) loses an in-place write into a view such as the diagonal
        gram = torch.bmm(bases.transpose(1, 2), bases) + ridge
        # (B*S, D, R)^T @ (B*S, D, N) -> (B*S, R, N)
        rhs = torch.bmm(bases.transpose(1, 2), x)
        # (B*S, R, R)^-1 @ (B*S, R, N) -> (B*S, R, N) -> (B*S, N, R)
        return ridge_solve(gram, rhs).transpose(1, 2)
