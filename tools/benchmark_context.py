"""Cost of global-context modules measured side by side: the paper's Table 3 on your machine.

Geng et al., "Is Attention Better Than Matrix Decomposition?" (ICLR 2021), Sec. 3.3, Table 3,
App. E.2: parameters, MACs, memory and time of context modules on one 1x512x128x128 tensor.

Usage::

    # Table 3 on this machine (default shape 1x512x128x128, CPU, 2 threads)
    python tools/benchmark_context.py --out-dir docs
    # on a shared machine: wait for quiet windows, repeat disturbed timings
    python tools/benchmark_context.py --out-dir docs --max-wait 600 --retries 3
    # a subset, another device
    python tools/benchmark_context.py --modules ham_nmf mmseg_ham sa --device cuda
    # scaling: time and memory against n = H*W, H = W from 32 to 256 (log-log)
    python tools/benchmark_context.py --sweep --out-dir docs

What is measured, per module, in one process and one run:

- params: number of parameters (the paper's "M" is 2**20, see the Hamburger row: 0.50M).
- MACs: counted by mmengine's ``FlopAnalyzer`` (fvcore's counter: one multiply-add per MAC,
  conv, (b)mm, einsum, norms; element-wise ops and ``linalg.solve`` are not counted) on the
  module in eval mode. For the Hamburger rows a hand count of the conv and matmul MACs
  (:func:`hamburger_macs`) is printed next to it as a cross-check.
- time: median over ``--runs`` runs after ``--warmup`` runs of (a) inference: eval mode under
  ``torch.no_grad()``; (b) forward+backward: train mode, the input requires grad, the output is
  back-propagated with a fixed random gradient (``out.backward(g)``); parameter gradients are
  reset (set to None) before each run. A measurement stops early after ``--budget`` seconds
  once 3 runs are done (the table reports how many runs were used).
- compute floor: counted FLOPs (2 x MACs) divided by the fp32 matmul rate measured on a square
  2048^3 matmul with the same threads, at the start, before every module and at the end of the
  run (the highest rate is used, which gives the lowest, strictest floor). For inference the
  FLOPs are mmengine's count; for forward+backward they are counted with
  ``torch.utils.flop_counter``'s per-operator formulas on the ops the timed call runs (the only
  library counter that sees the backward pass).
- peak memory: on CUDA the caching allocator's peak (``torch.cuda.max_memory_allocated``)
  during one call, minus the memory allocated before the call. On CPU there is no allocator
  peak counter, so the call is run once under ``torch.profiler`` with ``profile_memory=True``;
  the CPU allocator reports every allocation and free to the profiler, and the peak is the
  maximum of the running sum of those events (bytes alive above the state before the call:
  the input and the parameters, allocated before, are not included).

Interference: timings on a shared machine are only as good as the machine is quiet. The load
average (``os.getloadavg``) is recorded before the run, before every module and at the end, and
every timing records the CPU that *other* processes used while it ran (machine busy time from
/proc/stat minus this process's CPU time, in cores): a timing is undisturbed when that is near
0. ``--max-wait S`` waits (up to S seconds) for other processes to go under ``--quiet-cpu``
cores before each timing. Other tenants of a virtual machine can slow it down without showing in
/proc/stat, so every timing is also bracketed by a quick matmul probe; its speed (the slower
probe over the fastest probe seen) is reported. ``--retries R`` (default 2) repeats a timing
that others disturbed (``--quiet-cpu`` cores or more) or that ran below ``--slow`` (0.85) of the
best speed, up to R times, keeping the least disturbed attempt.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import os.path as osp
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from mmcv.cnn import ContextBlock, ConvModule, NonLocal2d  # noqa: E402
from mmengine.analysis import FlopAnalyzer  # noqa: E402
from mmengine.analysis.jit_handles import bmm_flop_jit  # noqa: E402
from mmseg.models.decode_heads.apc_head import ACM  # noqa: E402
from mmseg.models.decode_heads.da_head import CAM, PAM  # noqa: E402
from mmseg.models.decode_heads.dm_head import DCM  # noqa: E402
from mmseg.models.decode_heads.ema_head import EMAModule  # noqa: E402
from mmseg.models.decode_heads.ham_head import Hamburger as MMSegHamburger  # noqa: E402
from torch import Tensor, nn  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils.flop_counter import flop_registry  # noqa: E402

from hamseg.models import Hamburger, PolyNL  # noqa: E402

MIB = 2**20
BN = dict(type="BN", requires_grad=True)
RELU = dict(type="ReLU")

#: Table 3 of the paper: params (M = 2**20), MACs (G), train / infer memory (MB), train / infer
#: time (ms) on one 1x512x128x128 tensor, NVIDIA TITAN Xp.
PAPER_TABLE3 = {
    "SA": (1.00, 292.0, 5253, 2148, 242.0, 82.2),
    "DA": (4.82, 79.5, 2395, 2203, 72.6, 64.4),
    "A2": (1.01, 25.7, 326, 165, 22.9, 8.0),
    "APC": (2.03, 17.6, 458, 264, 26.5, 11.6),
    "DM": (3.00, 35.1, 557, 268, 65.7, 23.3),
    "ACF": (0.75, 79.5, 1380, 627, 71.0, 22.6),
    "Ham (CD)": (0.50, 16.2, 162, 102, 20.0, 13.0),
    "Ham (NMF)": (0.50, 17.6, 202, 98, 15.6, 7.7),
}
PAPER_SHAPE = (1, 512, 128, 128)


# ------------------------------------------------------------------------------------------------
# Context modules assembled from mmseg / mmcv building blocks, in = out = C channels
# ------------------------------------------------------------------------------------------------
class DualAttention(nn.Module):
    """DANet's dual attention: PAM(x) + CAM(x), mmseg's modules (DAHead sums the two branches).

    mmseg's DANet configs run PAM on 512 channels with ``pam_channels=64`` (C / 8).
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.pam = PAM(channels, max(channels // 8, 1))
        self.cam = CAM()

    def forward(self, x: Tensor) -> Tensor:
        return self.pam(x) + self.cam(x)


class PyramidContext(nn.Module):
    """Four branches of C / 4 channels concatenated back to C (APCNet's ACM or DMNet's DCM).

    mmseg's APCHead / DMHead concatenate their branches with the input and fuse them with a
    3x3 bottleneck of the head; here the branches are C / 4 wide so that their concatenation
    is the C-channel output (the pyramid-pooling layout), without the head's bottleneck.
    """

    def __init__(self, branches: list[nn.Module]) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([branch(x) for branch in self.branches], dim=1)


class EMAContext(nn.Module):
    """EMANet's context block as in mmseg's EMAHead: 1x1 conv, EMA module (EM attention, the
    bases' EM iterations without gradient), ReLU, 1x1 conv-BN, ReLU(x + .).

    It has the Hamburger's layout (lower bread, decomposition, upper bread, skip), which makes
    it the closest relative of Hamburger among mmseg's modules.
    """

    def __init__(self, channels: int, num_bases: int, num_stages: int = 3) -> None:
        super().__init__()
        self.ema_mid_conv = ConvModule(channels, channels, 1, norm_cfg=None, act_cfg=None)
        self.ema_module = EMAModule(channels, num_bases, num_stages, momentum=0.1)
        self.ema_out_conv = ConvModule(channels, channels, 1, norm_cfg=BN, act_cfg=None)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.ema_module(self.ema_mid_conv(x)), inplace=True)
        return F.relu(x + self.ema_out_conv(out))


# ------------------------------------------------------------------------------------------------
# The module table
# ------------------------------------------------------------------------------------------------
@dataclass
class Spec:
    """One row of the benchmark.

    Attributes:
        key: Short name for ``--modules``.
        label: Row label (Table 3 names where the paper has the row).
        config: What exactly is built, for the table.
        build: Builds the module for (C, R, K).
        paper: Key of :data:`PAPER_TABLE3` to compare against, if any.
        ham: (type, variant, grad) of a hamseg Hamburger, for the hand count.
        quadratic: Whether memory grows with n^2 (N x N attention maps): the sweep skips sizes
            whose n^2 maps would exceed ``--max-pairwise-gb``.
    """

    key: str
    label: str
    config: str
    build: Callable[[int, int, int], nn.Module]
    paper: Optional[str] = None
    ham: Optional[tuple[str, str, str]] = None
    quadratic: bool = False


def _ham(kind: str, grad: str, variant: str = "paper") -> Callable[[int, int, int], nn.Module]:
    def build(c: int, r: int, k: int) -> nn.Module:
        cfg = dict(type=kind, S=1, R=r, train_steps=k, eval_steps=k, grad=grad)
        if kind == "CD":
            cfg.update(inv_t=100.0, beta=0.1)
        return Hamburger(c, c, ham_cfg=cfg, variant=variant, norm_cfg=BN, act_cfg=RELU)

    return build


def _mmseg_ham(c: int, r: int, k: int) -> nn.Module:
    # LightHamHead's block at the paper's setting; its NMF2D defaults to 7 eval steps, set to K
    # here so that both Hamburgers run the same arithmetic.
    kwargs = dict(MD_S=1, MD_R=r, train_steps=k, eval_steps=k, inv_t=1, rand_init=True)
    return MMSegHamburger(c, ham_kwargs=kwargs, norm_cfg=BN)


def _apc(c: int, r: int, k: int) -> nn.Module:
    # GroupNorm instead of BN: with batch 1, BN cannot normalise the 1x1 global-pooling branch
    # in train mode (one value per channel).
    b = max(c // 4, 1)
    gn = dict(type="GN", num_groups=math.gcd(max(b // 2, 1), 32), requires_grad=True)
    return PyramidContext([ACM(s, True, c, b, None, gn, RELU) for s in (1, 2, 3, 6)])


def _dm(c: int, r: int, k: int) -> nn.Module:
    b = max(c // 4, 1)
    return PyramidContext([DCM(s, False, c, b, None, BN, RELU) for s in (1, 3, 5, 7)])


def specs() -> list[Spec]:
    """All rows, in table order."""
    rows = [
        Spec(
            "ham_nmf",
            "Ham (NMF)",
            "hamseg Hamburger 'paper', NMF, d=C, r, K, one-step grad",
            _ham("NMF", "one_step"),
            paper="Ham (NMF)",
            ham=("NMF", "paper", "one_step"),
        ),
        Spec(
            "ham_nmf_bptt",
            "Ham (NMF, BPTT)",
            "as Ham (NMF), gradient through all K steps",
            _ham("NMF", "bptt"),
            ham=("NMF", "paper", "bptt"),
        ),
        Spec(
            "ham_cd",
            "Ham (CD)",
            "hamseg Hamburger 'paper', CD (1/T=100, beta=0.1), one-step grad",
            _ham("CD", "one_step"),
            paper="Ham (CD)",
            ham=("CD", "paper", "one_step"),
        ),
        Spec(
            "ham_cd_bptt",
            "Ham (CD, BPTT)",
            "as Ham (CD), gradient through all K steps",
            _ham("CD", "bptt"),
            ham=("CD", "paper", "bptt"),
        ),
        Spec(
            "ham_vq",
            "Ham (VQ)",
            "hamseg Hamburger 'paper', VQ (1/T=100), one-step grad",
            _ham("VQ", "one_step"),
            ham=("VQ", "paper", "one_step"),
        ),
        Spec(
            "ham_vq_bptt",
            "Ham (VQ, BPTT)",
            "as Ham (VQ), gradient through all K steps",
            _ham("VQ", "bptt"),
            ham=("VQ", "paper", "bptt"),
        ),
        Spec(
            "ham_nmf_release",
            "Ham (NMF, release V2)",
            "hamseg Hamburger 'release' (cheese conv-BN-ReLU), NMF, one-step grad",
            _ham("NMF", "one_step", "release"),
            ham=("NMF", "release", "one_step"),
        ),
        Spec(
            "mmseg_ham",
            "mmseg Hamburger (peer)",
            "mmseg 1.2.2 LightHamHead's Hamburger, NMF2D r, K (eval K, not its default 7), BPTT",
            _mmseg_ham,
        ),
        Spec(
            "sa",
            "SA",
            "mmcv NonLocal2d(C, reduction=1), embedded Gaussian, scaled",
            lambda c, r, k: NonLocal2d(c, reduction=1, use_scale=True, mode="embedded_gaussian"),
            paper="SA",
            quadratic=True,
        ),
        Spec(
            "da",
            "DA",
            "mmseg DANet PAM(C, C/8) + CAM",
            lambda c, r, k: DualAttention(c),
            paper="DA",
            quadratic=True,
        ),
        Spec(
            "apc",
            "APC",
            "mmseg APCNet ACM x4 (scales 1,2,3,6, fusion, GN), C/4 each, concatenated",
            _apc,
            paper="APC",
        ),
        Spec(
            "dm",
            "DM",
            "mmseg DMNet DCM x4 (filters 1,3,5,7), C/4 each, concatenated",
            _dm,
            paper="DM",
        ),
        Spec(
            "ema",
            "EMA",
            "mmseg EMANet: 1x1 conv, EMAModule(C, r bases, 3 stages), 1x1 conv-BN, skip",
            lambda c, r, k: EMAContext(c, r),
        ),
        Spec(
            "gc",
            "GC",
            "mmcv ContextBlock(C, ratio 1/4) (GCNet)",
            lambda c, r, k: ContextBlock(c, 1 / 4),
        ),
        Spec(
            "polynl",
            "Poly-NL",
            "hamseg PolyNL(C), Eq. 6 of Babiloni et al. 2021",
            lambda c, r, k: PolyNL(c),
        ),
    ]
    return rows


SPECS = {s.key: s for s in specs()}
#: Not measured: A2 (Double Attention) and ACF (CFNet) have no mmseg 1.2.2 module; CCNet's
#: criss-cross attention and PSANet need mmcv's compiled ops (not in mmcv-lite).
NOT_AVAILABLE = {
    "A2": "no module in mmseg 1.2.2",
    "ACF": "no module in mmseg 1.2.2",
    "CC (CCNet)": "needs mmcv's compiled ops (mmcv-lite has none)",
}


# ------------------------------------------------------------------------------------------------
# Counting
# ------------------------------------------------------------------------------------------------
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


def _bmm_any_signature(inputs: list, outputs: list) -> Any:
    """mmengine's bmm handle, also for ``torch.bmm(a, b, out=c)`` (traced with 3 inputs)."""
    return bmm_flop_jit(inputs[:2], outputs)


#: Operators that are matrix products (the hand count's "conv" + "matmul").
PRODUCT_OPS = ("conv", "bmm", "addmm", "matmul", "mm", "linear", "einsum", "baddbmm")


def count_macs(module: nn.Module, x: Tensor) -> tuple[int, dict[str, int]]:
    """MACs of one inference forward (eval mode), by mmengine's FlopAnalyzer (fvcore counter).

    The only change to the library's handles: ``aten::bmm`` also accepts the ``out=`` form
    (same MACs), which the in-place NMF steps use.
    """
    module.eval()
    with torch.no_grad():
        analyzer = FlopAnalyzer(module, (x,))
        analyzer.set_op_handle("aten::bmm", _bmm_any_signature)
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


# ------------------------------------------------------------------------------------------------
# Timing and memory
# ------------------------------------------------------------------------------------------------
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_fn(
    fn: Callable[[], Any], device: torch.device, runs: int, warmup: int, budget: float
) -> list[float]:
    """Wall times (s) of ``runs`` calls after ``warmup`` calls; stops after ``budget`` seconds
    once three runs are done."""
    for _ in range(warmup):
        fn()
        _sync(device)
    times: list[float] = []
    start = time.perf_counter()
    for _ in range(max(runs, 1)):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
        if len(times) >= min(3, runs) and time.perf_counter() - start > budget:
            break
    return times


def matmul_rate(device: torch.device, size: int = 2048, runs: int = 5) -> float:
    """fp32 matmul rate (FLOP/s): median over ``runs`` of a size^3 product with the current
    threads (TF32 off on CUDA)."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=gen).to(device)
    b = torch.randn(size, size, generator=gen).to(device)
    out = torch.empty(size, size, device=device)
    times = time_fn(lambda: torch.mm(a, b, out=out), device, runs, 2, budget=30.0)
    return 2.0 * size**3 / statistics.median(times)


def peak_memory(fn: Callable[[], Any], device: torch.device) -> int:
    """Peak bytes allocated during one call of ``fn`` above those allocated before it.

    CUDA: the caching allocator's peak statistic. CPU: the running sum of the CPU allocator's
    allocation and free events recorded by ``torch.profiler`` (``profile_memory=True``).
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device) - base)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    with tempfile.TemporaryDirectory() as tmp:
        path = osp.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    mem = [
        e
        for e in events
        if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type", 0) == 0
    ]
    mem.sort(key=lambda e: (e["ts"], e["args"].get("Ev Idx", 0)))
    alive = peak = 0
    for e in mem:
        alive += int(e["args"]["Bytes"])
        peak = max(peak, alive)
    return peak


def load() -> float:
    """1-minute load average (NaN where unavailable)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return float("nan")


def _busy_seconds() -> Optional[float]:
    """CPU seconds spent busy by the whole machine so far (Linux /proc/stat), else None."""
    try:
        with open("/proc/stat") as f:
            fields = [float(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class OtherCPU:
    """CPU used by other processes while a block runs, in cores (machine busy time minus this
    process's CPU time, over the wall time). NaN where /proc/stat is unavailable.

    Usage: ``with OtherCPU() as other: ...``, then ``other.cores``.
    """

    def __enter__(self) -> OtherCPU:
        self._busy, self._own, self._wall = _busy_seconds(), self._own_seconds(), time.time()
        self.cores = float("nan")
        return self

    @staticmethod
    def _own_seconds() -> float:
        t = os.times()
        return t.user + t.system

    def __exit__(self, *exc: Any) -> None:
        busy, wall = _busy_seconds(), time.time() - self._wall
        if busy is not None and self._busy is not None and wall > 0:
            own = self._own_seconds() - self._own
            self.cores = round(max(busy - self._busy - own, 0.0) / wall, 2)


def wait_for_quiet(threshold: float, max_wait: float, probe: float = 3.0) -> float:
    """Sleep until other processes use less than ``threshold`` cores (sampled over ``probe``
    seconds) or ``max_wait`` seconds have passed; returns the last sample."""
    start, cores = time.time(), float("nan")
    while True:
        with OtherCPU() as other:
            time.sleep(probe)
        cores = other.cores
        if not cores >= threshold or time.time() - start >= max_wait:  # NaN: no /proc
            return cores


# ------------------------------------------------------------------------------------------------
# One row
# ------------------------------------------------------------------------------------------------
@dataclass
class Settings:
    shape: tuple[int, int, int, int]
    device: torch.device
    rank: int
    steps: int
    runs: int
    warmup: int
    budget: float
    memory: bool = True
    count: bool = True
    quiet: float = 0.3
    max_wait: float = 0.0
    retries: int = 2
    slow: float = 0.85
    probe_best: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def probe_rate(device: torch.device) -> float:
    """A quick fp32 matmul rate (1024^3, median of 5): how fast the machine runs right now.

    On a virtual machine other tenants can slow it down without showing in /proc/stat; a probe
    well below the best one seen reveals that.
    """
    return matmul_rate(device, 1024, runs=5)


def timed(fn: Callable[[], Any], st: Settings) -> tuple[list[float], float, float]:
    """Times of ``fn`` (see :func:`time_fn`), the CPU other processes used meanwhile, and the
    machine's speed around the timing relative to the fastest seen (:func:`probe_rate` before
    and after; 1.0 = as fast as ever).

    With ``st.max_wait`` > 0 it first waits for a quiet machine; with ``st.retries`` it
    measures again while others used ``st.quiet`` cores or more, or while the machine ran
    below ``st.slow`` of its best probe, and keeps the least disturbed attempt.
    """
    best: Optional[tuple[list[float], float, float]] = None
    for _ in range(st.retries + 1):
        if st.max_wait > 0:
            wait_for_quiet(st.quiet, st.max_wait)
        before = probe_rate(st.device)
        with OtherCPU() as other:
            times = time_fn(fn, st.device, st.runs, st.warmup, st.budget)
        after = probe_rate(st.device)
        st.probe_best = max(st.probe_best, before, after)
        speed = round(min(before, after) / st.probe_best, 2)
        attempt = (times, other.cores, speed)
        if best is None or (other.cores, -speed) < (best[1], -best[2]) or math.isnan(best[1]):
            best = attempt
        if not other.cores >= st.quiet and speed >= st.slow:
            break
    assert best is not None
    return best


def _inference(module: nn.Module, x: Tensor) -> Callable[[], Any]:
    def run() -> None:
        with torch.no_grad():
            module(x)

    return run


def _train(module: nn.Module, x: Tensor, grad: Tensor) -> Callable[[], Any]:
    xr = x.detach().clone().requires_grad_(True)
    params = [p for p in module.parameters() if p.requires_grad]

    def run() -> None:
        for p in params:
            p.grad = None
        xr.grad = None
        module(xr).backward(grad)

    return run


def measure(spec: Spec, st: Settings, rate: float) -> dict[str, Any]:
    """Params, MACs, times, floors and peak memory of one module."""
    torch.manual_seed(0)
    b, c, h, w = st.shape
    module = spec.build(c, st.rank, st.steps).to(st.device)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(st.shape, generator=gen).to(st.device)
    grad = torch.randn(st.shape, generator=gen).to(st.device)
    row: dict[str, Any] = dict(key=spec.key, label=spec.label, config=spec.config)
    row["load_before"] = load()
    row["params"] = sum(p.numel() for p in module.parameters())
    if st.count:
        row["macs"], row["macs_by_op"] = count_macs(module, x)
        row["train_flops"] = count_train_flops(module, x, grad)
        if spec.ham is not None:
            kind, variant, _ = spec.ham
            row["macs_hand"] = hamburger_macs(
                st.shape, kind, st.rank, st.steps, variant, path="module"
            )
            row["macs_paper"] = hamburger_macs(st.shape, kind, st.rank, st.steps, variant)["total"]
            counted = sum(row["macs_by_op"].get(op, 0) for op in PRODUCT_OPS)
            row["macs_products"] = counted
            row["macs_hand_rel_diff"] = counted / row["macs_hand"]["total"] - 1.0
            row["macs_run"] = count_run_macs(module, x)
            fast = h * w >= Hamburger.fast_path_min_positions  # else the module calls run
            row["macs_run_hand"] = hamburger_macs(
                st.shape, kind, st.rank, st.steps, variant, path="fast" if fast else "module"
            )["total"]

    module.eval()
    t, row["infer_other_cpu"], row["infer_speed"] = timed(_inference(module, x), st)
    row["infer_ms"], row["infer_runs"] = 1e3 * statistics.median(t), len(t)
    module.train()
    t, row["train_other_cpu"], row["train_speed"] = timed(_train(module, x, grad), st)
    row["train_ms"], row["train_runs"] = 1e3 * statistics.median(t), len(t)
    if st.count:
        set_floors(row, rate)
    if st.memory:
        module.eval()
        row["infer_mem_mb"] = peak_memory(_inference(module, x), st.device) / MIB
        module.train()
        row["train_mem_mb"] = peak_memory(_train(module, x, grad), st.device) / MIB
    row["load_after"] = load()
    return row


# ------------------------------------------------------------------------------------------------
# Targets (issue [speed]) and reports
# ------------------------------------------------------------------------------------------------
def set_floors(row: dict[str, Any], rate: float) -> None:
    """The compute floors of a counted row at a matmul rate (FLOP/s), and the time over them."""
    row["infer_floor_ms"] = 1e3 * 2 * row["macs"] / rate
    row["train_floor_ms"] = 1e3 * row["train_flops"] / rate
    row["infer_x_floor"] = row["infer_ms"] / row["infer_floor_ms"]
    row["train_x_floor"] = row["train_ms"] / row["train_floor_ms"]
    if "macs_run" in row:
        row["infer_run_floor_ms"] = 1e3 * 2 * row["macs_run"] / rate


def evaluate_targets(rows: dict[str, dict], shape: tuple[int, ...]) -> list[dict[str, Any]]:
    """The issue's targets, evaluated on the measured rows that are present."""
    out: list[dict[str, Any]] = []

    def add(name: str, value: float, limit: str, passed: bool, detail: str) -> None:
        out.append(dict(target=name, value=value, limit=limit, passed=bool(passed), detail=detail))

    nmf, peer, sa = rows.get("ham_nmf"), rows.get("mmseg_ham"), rows.get("sa")
    if nmf and "infer_x_floor" in nmf:
        v = nmf["infer_x_floor"]
        add(
            "Ham (NMF) inference <= 1.2x compute floor",
            v,
            "<= 1.2",
            v <= 1.2,
            f"{nmf['infer_ms']:.1f} ms vs floor {nmf['infer_floor_ms']:.1f} ms"
            + (
                f" (the floor of the products it runs, {nmf['macs_run'] / 1e9:.2f}G MACs: "
                f"{nmf['infer_run_floor_ms']:.1f} ms, "
                f"x{nmf['infer_ms'] / nmf['infer_run_floor_ms']:.2f})"
                if "infer_run_floor_ms" in nmf
                else ""
            ),
        )
    if nmf and peer:
        v = nmf["train_ms"] / peer["train_ms"]
        add(
            "Ham (NMF) fwd+bwd <= 0.5x mmseg Hamburger fwd+bwd",
            v,
            "<= 0.5",
            v <= 0.5,
            f"{nmf['train_ms']:.1f} ms vs {peer['train_ms']:.1f} ms",
        )
        if "train_mem_mb" in nmf and "train_mem_mb" in peer:
            v = nmf["train_mem_mb"] / peer["train_mem_mb"]
            add(
                "Ham (NMF) fwd+bwd peak memory below mmseg Hamburger's",
                v,
                "< 1",
                v < 1,
                f"{nmf['train_mem_mb']:.0f} MiB vs {peer['train_mem_mb']:.0f} MiB",
            )
    if nmf and sa:
        v = sa["train_ms"] / nmf["train_ms"]
        add(
            "Ham (NMF) fwd+bwd >= 10x faster than SA",
            v,
            ">= 10",
            v >= 10,
            f"{sa['train_ms']:.0f} ms / {nmf['train_ms']:.1f} ms",
        )
    if tuple(shape) == PAPER_SHAPE:
        for key, paper in (("ham_nmf", "Ham (NMF)"), ("ham_cd", "Ham (CD)")):
            row = rows.get(key)
            if not row:
                continue
            p_params, p_macs = PAPER_TABLE3[paper][:2]
            v = row["params"] / MIB
            add(
                f"{paper} params {p_params:.2f}M",
                v,
                f"{p_params:.2f}",
                round(v, 2) == p_params,
                f"{row['params']:,} parameters",
            )
            if "macs" in row:
                v = row["macs"] / 1e9 / p_macs - 1
                add(
                    f"{paper} MACs within 5% of {p_macs}G",
                    v,
                    "|.| <= 0.05",
                    abs(v) <= 0.05,
                    f"{row['macs'] / 1e9:.2f} G counted",
                )
    return out


def _fmt(v: Any, spec: str = ".1f") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, spec)


def markdown(result: dict[str, Any]) -> str:
    """The results as a markdown report (table, environment, targets)."""
    env, rows = result["env"], result["rows"]
    lines = [
        f"Input {'x'.join(map(str, env['shape']))}, {env['device']}, {env['threads']} threads, "
        f"r={env['rank']}, K={env['steps']}; median of up to {env['runs']} runs after "
        f"{env['warmup']} warm-up. {env['cpu']}; torch {env['torch']}.",
        "",
        f"fp32 matmul rate ({env['rate_size']}^3): {env['rate_start'] / 1e9:.0f} GFLOP/s at "
        f"start (others' CPU {env['rate_start_other_cpu']}), {env['rate_end'] / 1e9:.0f} "
        f"GFLOP/s at end (others' CPU {env['rate_end_other_cpu']}), measured before every "
        f"module too; floors use the highest, "
        f"{env['rate'] / 1e9:.0f} GFLOP/s. Machine load (1-min): {env['load_start']} at start, "
        f"{env['load_end']} at end, max {env['load_max']} before a module.",
        "",
        "Others' CPU: cores used by other processes during the timing (inference / "
        "forward+backward); speed: the machine's matmul speed around the timing over the best "
        "seen (1.0 = undisturbed); load: 1-minute load average before the module.",
        "",
        "| Module | Params (M) | MACs (G) | Infer ms | floor ms | x floor | Fwd+bwd ms | "
        "floor ms | x floor | Infer mem (MiB) | Fwd+bwd mem (MiB) | Others' CPU | speed | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        macs = _fmt(row.get("macs", 0) / 1e9, ".2f")
        lines.append(
            f"| {row['label']} | {row['params'] / MIB:.2f} | {macs}"
            f" | {row['infer_ms']:.1f} | {_fmt(row.get('infer_floor_ms'))} | "
            f"{_fmt(row.get('infer_x_floor'), '.2f')} | {row['train_ms']:.1f} | "
            f"{_fmt(row.get('train_floor_ms'))} | {_fmt(row.get('train_x_floor'), '.2f')} | "
            f"{_fmt(row.get('infer_mem_mb'), '.0f')} | {_fmt(row.get('train_mem_mb'), '.0f')} | "
            f"{_fmt(row.get('infer_other_cpu'), '.2f')} / {_fmt(row.get('train_other_cpu'), '.2f')}"
            f" | {_fmt(row.get('infer_speed'), '.2f')} / {_fmt(row.get('train_speed'), '.2f')}"
            f" | {row['load_before']} |"
        )
    hand = [r for r in rows if "macs_hand" in r]
    if hand:
        lines += [
            "",
            "MACs cross-check (Hamburger rows): the library's count of the matrix products "
            "(conv, (b)mm, addmm) of the module calls against the hand count "
            "(`hamburger_macs(path='module')`), and the hand count of the algorithms as written "
            "(path='paper'; NMF computes X^T D for its initial codes and again in its first "
            "update there):",
        ]
        for r in hand:
            ops = ", ".join(f"{k} {v:,}" for k, v in sorted(r["macs_by_op"].items()))
            lines.append(
                f"- {r['label']}: counted {r['macs_products']:,} vs hand "
                f"{r['macs_hand']['total']:,} ({100 * r['macs_hand_rel_diff']:+.3f}%); paper "
                f"{r['macs_paper']:,}; by op: {ops}"
            )
        lines += [
            "",
            "MACs run (Hamburger rows): the timed inference call computes the same outputs with "
            "fewer products: the bread after the ham multiplies the factors, (W D) C instead of "
            "W (D C). Counted on the call as it runs (torch's operator formulas, no module "
            "hooks) against the hand count of that path (path='fast'). The table's MACs and "
            "floors are the module calls' count above:",
        ]
        for r in hand:
            lines.append(
                f"- {r['label']}: run {r['macs_run']:,} vs hand {r['macs_run_hand']:,}; "
                f"floor {r['infer_run_floor_ms']:.1f} ms, inference "
                f"x{r['infer_ms'] / r['infer_run_floor_ms']:.2f} of it"
            )
    lines += ["", "Modules:"]
    for row in rows:
        runs = f"{row['infer_runs']}/{row['train_runs']} runs"
        lines.append(f"- {row['label']} (`{row['key']}`): {row['config']}; {runs}.")
    for name, why in result.get("not_available", {}).items():
        lines.append(f"- {name}: not measured, {why}.")
    if result["targets"]:
        lines += ["", "| Target | Value | Limit | Met | Detail |", "|---|---:|---|---|---|"]
        for t in result["targets"]:
            met = "yes" if t["passed"] else "**no**"
            lines.append(
                f"| {t['target']} | {t['value']:.3f} | {t['limit']} | {met} | {t['detail']} |"
            )
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: str) -> None:
    """Bar charts of time (with the compute floors) and peak memory per module."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    labels = [r["label"] for r in rows]
    pos = list(range(len(rows)))
    fig, axes = plt.subplots(1, 3, figsize=(18, 6))
    for ax, key, title in (
        (axes[0], "infer", "Inference time (ms)"),
        (axes[1], "train", "Forward+backward time (ms)"),
    ):
        ax.bar(pos, [r[f"{key}_ms"] for r in rows], color="tab:blue", label="measured")
        floors = [r.get(f"{key}_floor_ms") for r in rows]
        if all(f is not None for f in floors):
            ax.scatter(pos, floors, color="black", marker="_", s=300, label="compute floor")
        ax.set_yscale("log")
        ax.set_title(title)
        ax.legend()
    if rows and "infer_mem_mb" in rows[0]:
        width = 0.4
        axes[2].bar(
            [p - width / 2 for p in pos],
            [r["infer_mem_mb"] for r in rows],
            width,
            label="inference",
        )
        axes[2].bar(
            [p + width / 2 for p in pos],
            [r["train_mem_mb"] for r in rows],
            width,
            label="forward+backward",
        )
        axes[2].set_yscale("log")
        axes[2].legend()
    axes[2].set_title("Peak memory (MiB)")
    for ax in axes:
        ax.set_xticks(pos)
        ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=8)
        ax.grid(axis="y", which="both", alpha=0.3)
    env = result["env"]
    fig.suptitle(
        f"Context modules on {'x'.join(map(str, env['shape']))}, {env['device']}, "
        f"{env['threads']} threads (load {env['load_start']}-{env['load_end']})"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------
# Modes
# ------------------------------------------------------------------------------------------------
def environment(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    if device.type == "cuda":
        cpu = torch.cuda.get_device_name(device)
    return dict(
        device=str(device),
        threads=torch.get_num_threads(),
        cpu=cpu,
        cores=os.cpu_count(),
        torch=torch.__version__,
        python=platform.python_version(),
        rank=args.rank,
        steps=args.steps,
        runs=args.runs,
        warmup=args.warmup,
        rate_size=args.rate_size,
    )


def run_table(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """Table mode: every selected module on one input shape."""
    keys = args.modules or list(SPECS)
    env = environment(args, device)
    env.update(shape=list(args.shape), load_start=load())
    st = Settings(
        tuple(args.shape),
        device,
        args.rank,
        args.steps,
        args.runs,
        args.warmup,
        args.budget,
        memory=not args.no_memory,
        quiet=args.quiet_cpu,
        max_wait=args.max_wait,
        retries=args.retries,
        slow=args.slow,
    )

    def rate() -> tuple[float, float]:
        # Measured like the modules (waiting for quiet when asked): a disturbed rate would be
        # low, which would make the floors high, i.e. lenient.
        if st.max_wait > 0:
            wait_for_quiet(st.quiet, st.max_wait)
        with OtherCPU() as other:
            value = matmul_rate(device, args.rate_size)
        return value, other.cores

    env["rate_start"], env["rate_start_other_cpu"] = rate()
    rates = [env["rate_start"]]
    rows = []
    for i, key in enumerate(keys):
        if i:
            rates.append(rate()[0])  # before every module: the floors use the highest rate
        print(f"[benchmark] {key} (load {load()}) ...", flush=True)
        row = measure(SPECS[key], st, max(rates))
        rows.append(row)
        print(
            f"[benchmark]   params {row['params'] / MIB:.2f}M  MACs {row['macs'] / 1e9:.2f}G  "
            f"infer {row['infer_ms']:.1f} ms (floor {row['infer_floor_ms']:.1f})  "
            f"fwd+bwd {row['train_ms']:.1f} ms (floor {row['train_floor_ms']:.1f})",
            flush=True,
        )
    env["rate_end"], env["rate_end_other_cpu"] = rate()
    rates.append(env["rate_end"])
    env["rates"] = rates
    env["rate"] = max(rates)
    env["load_end"] = load()
    env["load_max"] = max([env["load_start"], env["load_end"]] + [r["load_before"] for r in rows])
    for row in rows:  # floors with the highest rate
        set_floors(row, env["rate"])
    by_key = {r["key"]: r for r in rows}
    result = dict(
        env=env,
        rows=rows,
        targets=evaluate_targets(by_key, tuple(args.shape)),
        paper_table3=PAPER_TABLE3,
        not_available=NOT_AVAILABLE,
    )
    return result


def run_sweep(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """Sweep mode: time and memory against n = H * W for a few modules (default Ham vs SA)."""
    keys = args.modules or ["ham_nmf", "sa"]
    b, c = args.shape[:2]
    env = environment(args, device)
    env.update(shape=[b, c], sizes=list(args.sizes), load_start=load())
    points, probe_best = [], 0.0
    for key in keys:
        spec = SPECS[key]
        for size in args.sizes:
            n = size * size
            entry: dict[str, Any] = dict(key=key, label=spec.label, size=size, n=n)
            pairwise_gb = 3 * b * n * n * 4 / 1e9
            if spec.quadratic and pairwise_gb > args.max_pairwise_gb:
                entry["skipped"] = (
                    f"n^2 maps need ~{pairwise_gb:.1f} GB > --max-pairwise-gb "
                    f"{args.max_pairwise_gb}"
                )
                print(f"[sweep] {key} H=W={size}: skipped ({entry['skipped']})", flush=True)
                points.append(entry)
                continue
            print(f"[sweep] {key} H=W={size} (load {load()}) ...", flush=True)
            st = Settings(
                (b, c, size, size),
                device,
                args.rank,
                args.steps,
                args.runs,
                args.warmup,
                args.budget,
                memory=not args.no_memory,
                count=False,
                quiet=args.quiet_cpu,
                max_wait=args.max_wait,
                retries=args.retries,
                slow=args.slow,
                probe_best=probe_best,
            )
            row = measure(spec, st, rate=1.0)
            probe_best = st.probe_best
            keep = ("_ms", "_mb", "_runs", "_other_cpu", "_speed")
            entry.update({k: row[k] for k in row if k.endswith(keep)})
            entry["load_before"] = row["load_before"]
            points.append(entry)
    env["load_end"] = load()
    fits = {}
    for key in keys:
        fits[key] = {}
        for metric in ("infer_ms", "train_ms", "infer_mem_mb", "train_mem_mb"):
            pts = [(p["n"], p[metric]) for p in points if p["key"] == key and p.get(metric)]
            if len(pts) >= 2:
                xs = [math.log(n) for n, _ in pts]
                ys = [math.log(v) for _, v in pts]
                mx, my = statistics.fmean(xs), statistics.fmean(ys)
                sxx = sum((x - mx) ** 2 for x in xs)
                slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
                fits[key][metric] = slope
    return dict(env=env, points=points, slopes=fits)


def sweep_markdown(result: dict[str, Any]) -> str:
    env = result["env"]
    lines = [
        f"Sweep: B={env['shape'][0]}, C={env['shape'][1]}, H=W in {env['sizes']}, "
        f"{env['device']}, {env['threads']} threads; load {env['load_start']} at start, "
        f"{env['load_end']} at end.",
        "",
        "| Module | H=W | n | Infer ms | Fwd+bwd ms | Infer mem (MiB) | Fwd+bwd mem (MiB) | "
        "Others' CPU | speed | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in result["points"]:
        if "skipped" in p:
            lines.append(
                f"| {p['label']} | {p['size']} | {p['n']} | skipped: {p['skipped']} |||||||"
            )
            continue
        lines.append(
            f"| {p['label']} | {p['size']} | {p['n']} | {p['infer_ms']:.1f} | "
            f"{p['train_ms']:.1f} | {_fmt(p.get('infer_mem_mb'), '.0f')} | "
            f"{_fmt(p.get('train_mem_mb'), '.0f')} | "
            f"{_fmt(p.get('infer_other_cpu'), '.2f')} / {_fmt(p.get('train_other_cpu'), '.2f')} | "
            f"{_fmt(p.get('infer_speed'), '.2f')} / {_fmt(p.get('train_speed'), '.2f')} | "
            f"{p['load_before']} |"
        )
    lines += ["", "Log-log slopes (exponent of n):", ""]
    for key, fits in result["slopes"].items():
        desc = ", ".join(f"{m} {s:.2f}" for m, s in fits.items())
        lines.append(f"- {SPECS[key].label}: {desc}")
    return "\n".join(lines) + "\n"


def sweep_plot(result: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    keys = list(result["slopes"])
    for i, key in enumerate(keys):
        colour = f"C{i}"
        pts = [p for p in result["points"] if p["key"] == key and "skipped" not in p]
        ns = [p["n"] for p in pts]
        label = SPECS[key].label
        axes[0].plot(
            ns, [p["infer_ms"] for p in pts], "o-", color=colour, label=f"{label} inference"
        )
        axes[0].plot(
            ns, [p["train_ms"] for p in pts], "s--", color=colour, label=f"{label} fwd+bwd"
        )
        if pts and "infer_mem_mb" in pts[0]:
            axes[1].plot(
                ns, [p["infer_mem_mb"] for p in pts], "o-", color=colour, label=f"{label} inference"
            )
            axes[1].plot(
                ns, [p["train_mem_mb"] for p in pts], "s--", color=colour, label=f"{label} fwd+bwd"
            )
    for ax, title in ((axes[0], "Time (ms)"), (axes[1], "Peak memory (MiB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("n = H x W")
        ax.set_title(title)
        ax.grid(which="both", alpha=0.3)
        ax.legend(fontsize=8)
    env = result["env"]
    fig.suptitle(
        f"Cost against n, B={env['shape'][0]}, C={env['shape'][1]}, {env['device']}, "
        f"{env['threads']} threads"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--shape",
        type=int,
        nargs=4,
        default=list(PAPER_SHAPE),
        metavar=("B", "C", "H", "W"),
        help="input shape (sweep: only B and C used)",
    )
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (CPU)")
    p.add_argument("--rank", type=int, default=64, help="r of the hams, bases of EMA")
    p.add_argument("--steps", type=int, default=6, help="K of the hams")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument(
        "--budget",
        type=float,
        default=60.0,
        help="seconds per measurement after which it stops (>= 3 runs)",
    )
    p.add_argument("--rate-size", type=int, default=2048, help="side of the matmul for the rate")
    p.add_argument(
        "--quiet-cpu",
        type=float,
        default=0.3,
        help="cores other processes may use for a timing to count as undisturbed",
    )
    p.add_argument(
        "--max-wait",
        type=float,
        default=0.0,
        help="seconds to wait, before each timing, for other processes to go under --quiet-cpu",
    )
    p.add_argument(
        "--retries", type=int, default=2, help="timings repeated while they were disturbed"
    )
    p.add_argument(
        "--slow",
        type=float,
        default=0.85,
        help="a timing is disturbed if the machine ran below this fraction of its best speed",
    )
    p.add_argument("--modules", nargs="+", choices=list(SPECS), default=None)
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory runs")
    p.add_argument("--out-dir", default="docs")
    p.add_argument(
        "--name", default=None, help="basename of the outputs (benchmark_context / benchmark_sweep)"
    )
    p.add_argument("--sweep", action="store_true", help="time and memory against n = H*W")
    p.add_argument("--sizes", type=int, nargs="+", default=[32, 45, 64, 91, 128, 181, 256])
    p.add_argument(
        "--max-pairwise-gb",
        type=float,
        default=8.0,
        help="sweep: skip quadratic modules whose n^2 maps need more",
    )
    return p.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    os.makedirs(args.out_dir, exist_ok=True)
    if args.sweep:
        result = run_sweep(args, device)
        base = osp.join(args.out_dir, args.name or "benchmark_sweep")
        text = sweep_markdown(result)
        sweep_plot(result, base + ".png")
    else:
        result = run_table(args, device)
        base = osp.join(args.out_dir, args.name or "benchmark_context")
        text = markdown(result)
        plot(result, base + ".png")
    with open(base + ".md", "w") as f:
        f.write(text)
    with open(base + ".json", "w") as f:
        json.dump(result, f, indent=1, default=str)
    print(text)
    print(f"[benchmark] wrote {base}.md, {base}.json, {base}.png")
    result["files"] = [base + ext for ext in (".md", ".json", ".png")]
    return result


if __name__ == "__main__":
    main()
