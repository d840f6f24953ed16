"""MACs of a module: mmengine's counter, the operators a call runs, and a hand count.

Three counts, each a cross-check of the others (docs/benchmark.md):

- :func:`count_macs`: mmengine's ``FlopAnalyzer`` (fvcore's counter: one multiply-add per MAC;
  conv, (b)mm, einsum, norms; element-wise ops and ``linalg.solve`` are not counted) on the module
  calls of one inference forward in eval mode.
- :func:`count_run_macs` / :func:`count_train_flops`: torch's per-operator formulas
  (``torch.utils.flop_counter``) on the operators a call actually runs, without module hooks, so
  that hamseg's hook-free inference path is what gets counted; the only library counter that also
  sees the backward pass.
- :func:`hamburger_macs`: the hand count of a Hamburger's conv and matmul MACs (paper Sec. 2.2,
  Alg. 1-3), for the algorithms as written and for the paths hamseg runs.
"""

from __future__ import annotations

from typing import Optional

import torch
from mmengine.analysis import FlopAnalyzer
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry


def hamburger_macs(
    shape: tuple[int, int, int, int],
    kind: str,
    r: int,
    k: int,
    variant: str = "paper",
    latent: Optional[int] = None,
    path: str = "paper",
) -> dict[str, int]:
    """Hand count of the conv and matmul MACs of a Hamburger (one forward, K steps, S = 1).

    With d the ham's channels, n = H * W and X of shape (d, n) (paper Sec. 2.2, Alg. 1-3):

    - breads: W_l (d x C) and W_u (C x d) applied to n positions: 2 C d n; the release's cheese
      adds d^2 n.
    - NMF (Alg. 2): codes init X^T D: n d r; each step: X^T D (n d r), D^T D (d r^2), C (D^T D)
      (n r^2), X C (d n r), C^T C (n r^2), D (C^T C) (d r^2); the final code update: n d r +
      d r^2 + n r^2; the reconstruction D C^T: d r n.
    - CD (Alg. 3): each step: cosine X^T D (n d r), X C (d n r); final: D^T D (d r^2), D^T X
      (d r n) and the r x r solve (not counted: neither is it by the library counter);
      reconstruction d r n.
    - VQ (Alg. 1): each step: cosine (n d r) and X C (d n r); final cosine n d r; reconstruction
      d r n.

    Args:
        shape: (B, C, H, W) of the input.
        kind: 'NMF', 'CD' or 'VQ'.
        r: Rank.
        k: Steps K.
        variant: 'paper' or 'release'.
        latent: d (defaults to C).

    ``path`` selects whose arithmetic is counted (the outputs are the same for all three):

    - 'paper': the algorithms as written above (and in the release).
    - 'module': what hamseg's ham runs in place (one-step gradient, or no autograd): NMF's
      first code update reuses the initial codes' logits X^T D (n d r less).
    - 'fast': 'module' plus hamseg's Hamburger inference path (no autograd, maps of at least
      ``Hamburger.fast_path_min_positions`` positions): the bread after the ham (paper: upper
      bread, release: cheese) multiplies the factors, (W D) C, costing C_out d r + C_out r n
      instead of d r n + C_out d n.

    Returns:
        MACs of the breads ('conv'), of the ham ('matmul') and their sum ('total'). On the
        inference path the bread multiplied into the factors counts as 'matmul'.
    """
    b, c, h, w = shape
    d = latent or c
    n = h * w
    conv = 2 * c * d * n + (d * d * n if variant == "release" else 0)
    if kind == "NMF":
        step = 2 * n * d * r + 2 * n * r * r + 2 * d * r * r
        ham = n * d * r + k * step + (n * d * r + d * r * r + n * r * r) + d * r * n
    elif kind == "CD":
        ham = k * 2 * n * d * r + (d * r * r + d * r * n) + d * r * n
    elif kind == "VQ":
        ham = k * 2 * n * d * r + n * d * r + d * r * n
    else:
        raise ValueError(f"unknown ham {kind!r}")
    if path not in ("paper", "module", "fast"):
        raise ValueError(f"unknown path {path!r}")
    if path != "paper" and kind == "NMF" and k > 0:
        ham -= n * d * r
    if path == "fast":
        c_out = d if variant == "release" else c  # the cheese (d -> d) or the upper bread
        conv -= c_out * d * n
        ham += -d * r * n + c_out * d * r + c_out * r * n
    return {"conv": b * conv, "matmul": b * ham, "total": b * (conv + ham)}


#: Operators that are matrix products (the hand count's "conv" + "matmul").
PRODUCT_OPS = ("conv", "bmm", "addmm", "matmul", "mm", "linear", "einsum", "baddbmm")


def count_macs(module: nn.Module, x: Tensor) -> tuple[int, dict[str, int]]:
    """MACs of one inference forward (eval mode), by mmengine's FlopAnalyzer (fvcore counter),
    with the library's own operator handles: while a trace records, the hams take no ``out=``
    buffers (:func:`hamseg.models.tracing.is_tracing`), so ``bmm_flop_jit`` counts them as is.
    """
    module.eval()
    with torch.no_grad():
        analyzer = FlopAnalyzer(module, (x,))
        analyzer.unsupported_ops_warnings(False)
        analyzer.uncalled_modules_warnings(False)
        return int(analyzer.total()), {k: int(v) for k, v in analyzer.by_operator().items()}


class _RunFlops(TorchDispatchMode):
    """FLOPs of the operators a call runs, by torch's own per-operator formulas
    (``torch.utils.flop_counter``), also for in-place variants such as ``baddbmm_``.

    Unlike ``FlopCounterMode`` it installs no module hooks, so a module's hook-free fast path
    (hamseg's Hamburger) is what gets counted: the call that is timed. Backward ops run on the
    calling thread on CPU and are counted too.
    """

    def __init__(self) -> None:
        super().__init__()
        self.flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func._overloadpacket
        name = packet.__name__
        if packet not in flop_registry and name.endswith("_"):
            packet = getattr(torch.ops.aten, name[:-1], packet)
        if packet in flop_registry:
            self.flops += flop_registry[packet](*args, **kwargs, out_val=out)
        return out


def count_run_macs(module: nn.Module, x: Tensor) -> int:
    """MACs of one timed inference call as it runs (eval mode, no autograd): the matrix
    products the module executes (see :class:`_RunFlops`), FLOPs / 2."""
    module.eval()
    with torch.no_grad(), _RunFlops() as counter:
        module(x)
    return counter.flops // 2


def count_train_flops(module: nn.Module, x: Tensor, grad: Tensor) -> int:
    """FLOPs (2 per MAC) of one forward+backward in train mode (see :class:`_RunFlops`)."""
    module.train()
    xr = x.detach().clone().requires_grad_(True)
    with _RunFlops() as counter:
        module(xr).backward(grad)
    module.zero_grad(set_to_none=True)
    return counter.flops
