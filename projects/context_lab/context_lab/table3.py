"""The paper's Table 3 on your machine (Geng et al., ICLR 2021, Sec. 3.3): params, MACs, time
and peak memory of context modules on one 1x512x128x128 map, inference and forward+backward.

    python -m projects.context_lab.context_lab.table3 --rounds 5 --out work_dirs/table3.json
    python -m projects.context_lab.context_lab.table3 --modules ham_nmf sa --sizes 32 64 128

FLOPs: one dispatch-level counter (torch's formulas per operator, products and convolutions
only) for the forward and for forward+backward, both in train mode; torch's own formula counts
a grouped convolution's backward as if ungrouped (DMNet's dynamic depthwise filters: 12x), so
it is replaced here. MACs = forward FLOPs / 2. Times: the modules take turns, ``--rounds``
rounds, the order reversed every other round; median and spread ((max - min) / median).
Memory: the peak allocated during one call above what was allocated before (CUDA: the caching
allocator's counter; CPU: the running sum of torch's allocations in torch.profiler's memory
events).
"""

from __future__ import annotations

import json
import math
import os.path as osp
import statistics
import tempfile
import time
from collections.abc import Sequence
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from mmcv.cnn import ContextBlock, ConvModule, NonLocal2d
from mmseg.models.decode_heads.apc_head import ACM
from mmseg.models.decode_heads.da_head import CAM, PAM
from mmseg.models.decode_heads.dm_head import DCM
from mmseg.models.decode_heads.ema_head import EMAModule
from mmseg.models.decode_heads.ham_head import Hamburger as MMSegHamburger
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from hamseg.models import Hamburger

from .attn_conv import AttnConv
from .compare import machine
from .poly_nl import PolyNL

BN, RELU = dict(type="BN", requires_grad=True), dict(type="ReLU")
#: Table 3's input, (B, C, H, W); its rows: README.md.
PAPER_SHAPE = (1, 512, 128, 128)


class DoubleAttention(nn.Module):
    """A^2-Net's block (Chen et al. 2018, Eq. 1-4), c_m = c_n = C (Table 3's 1.01M): gather
    G = A softmax_n(theta X)^T, distribute Z = G softmax_c(rho X), out = X + BN(W Z)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.feats, self.gather, self.spread = (nn.Conv2d(c, c, 1) for _ in range(3))
        self.restore = ConvModule(c, c, 1, norm_cfg=BN, act_cfg=None)

    def forward(self, x: Tensor) -> Tensor:
        feats = self.feats(x).flatten(2)  # A: (B, c_m, n)
        gather = F.softmax(self.gather(x).flatten(2), dim=2)  # (B, c_n, n), over n
        spread = F.softmax(self.spread(x).flatten(2), dim=1)  # (B, c_n, n), over c_n
        g = feats @ gather.transpose(1, 2)  # (B, c_m, n) @ (B, n, c_n) -> (B, c_m, c_n)
        return x + self.restore((g @ spread).view_as(x))  # (B, c_m, c_n) @ (B, c_n, n)


class CooccurrentFeatures(nn.Module):
    """Our reading of CFNet's ACF module (Zhang et al. 2019), C/2 wide (Table 3's 0.75M):
    P = softmax_j(phi(x_i)^T psi(x_j)) aggregates rho(X), concatenated with a pooled prior."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.phi, self.psi, self.rho, self.prior = (nn.Conv2d(c, c // 2, 1) for _ in range(4))
        self.out = ConvModule(c // 2 * 2, c, 1, norm_cfg=BN, act_cfg=RELU)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = (m(x).flatten(2) for m in (self.phi, self.psi, self.rho))  # (B, C/2, n)
        prob = F.softmax(q.transpose(1, 2) @ k, dim=2)  # (B, n, C/2) @ (B, C/2, n) -> (B, n, n)
        agg = (v @ prob.transpose(1, 2)).view(x.shape[0], -1, *x.shape[2:])  # (B, C/2, n)
        prior = self.prior(x.mean(dim=(2, 3), keepdim=True)).expand_as(agg)
        return self.out(torch.cat([agg, prior], dim=1))


class Branches(nn.Module):
    """Branches on one input, summed (DANet) or concatenated and merged (APCNet, DMNet)."""

    def __init__(self, branches: list[nn.Module], merge: Optional[nn.Module] = None) -> None:
        super().__init__()
        self.branches, self.merge = nn.ModuleList(branches), merge

    def forward(self, x: Tensor) -> Tensor:
        outs = [b(x) for b in self.branches]
        return sum(outs) if self.merge is None else self.merge(torch.cat(outs, dim=1))


class EMAContext(nn.Module):
    """mmseg's EMAHead block: 1x1 conv, EMA (r bases, 3 stages), ReLU, 1x1 conv-BN, skip."""

    def __init__(self, c: int, r: int) -> None:
        super().__init__()
        self.mid = ConvModule(c, c, 1, norm_cfg=None, act_cfg=None)
        self.ema = EMAModule(c, r, 3, momentum=0.1)
        self.out = ConvModule(c, c, 1, norm_cfg=BN, act_cfg=None)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x + self.out(F.relu(self.ema(self.mid(x)))))


def _ham(kind: str, grad: str = "one_step", variant: str = "paper") -> Callable:
    def build(c: int, r: int, k: int) -> nn.Module:
        cfg = dict(type=kind, S=1, R=r, train_steps=k, eval_steps=k, grad=grad)
        cfg.update(dict(inv_t=100.0, beta=0.1) if kind == "CD" else {})
        return Hamburger(c, c, ham_cfg=cfg, variant=variant, norm_cfg=BN, act_cfg=RELU)

    return build


def _cbr(c_in: int, c_out: int, k: int) -> nn.Module:
    return ConvModule(c_in, c_out, k, padding=k // 2, norm_cfg=BN, act_cfg=RELU)


def _apc(c: int, r: int, k: int) -> nn.Module:  # C/2 per ACM; GN: batch 1 cannot BN a 1x1 pool
    gn = dict(type="GN", num_groups=math.gcd(c // 4, 32), requires_grad=True)
    acms = [ACM(s, True, c, c // 2, None, gn, RELU) for s in (1, 2, 3, 6)]
    return Branches(acms, _cbr(2 * c, c // 2, 1))


def _da(c: int, r: int, k: int) -> nn.Module:  # DAHead's 3x3 conv before PAM and CAM: 4.82M
    return Branches([nn.Sequential(_cbr(c, c, 3), m) for m in (PAM(c, c // 8), CAM())])


def _dm(c: int, r: int, k: int) -> nn.Module:  # C per DCM (Table 3: 3.00M), concatenated
    return Branches([DCM(s, True, c, c, None, BN, RELU) for s in (1, 3, 5, 7)], nn.Identity())


def _mmseg_ham(c: int, r: int, k: int) -> nn.Module:  # LightHamHead's block, K eval steps too
    kwargs = dict(MD_S=1, MD_R=r, train_steps=k, eval_steps=k, inv_t=1, rand_init=True)
    return MMSegHamburger(c, ham_kwargs=kwargs, norm_cfg=BN)


#: key -> (label, build(C, r, K), N x N maps); ``attnconv`` only on request (8 maps of n^2).
SPECS: dict[str, tuple[str, Callable[[int, int, int], nn.Module], bool]] = {
    "ham_nmf": ("Ham (NMF)", _ham("NMF"), False),
    "ham_nmf_bptt": ("Ham (NMF, BPTT)", _ham("NMF", "bptt"), False),
    "ham_cd": ("Ham (CD)", _ham("CD"), False),
    "ham_vq": ("Ham (VQ)", _ham("VQ"), False),
    "ham_nmf_release": ("Ham (NMF, release V2)", _ham("NMF", variant="release"), False),
    "mmseg_ham": ("mmseg Hamburger (NMF2D, BPTT)", _mmseg_ham, False),
    "sa": ("SA", lambda c, r, k: NonLocal2d(c, reduction=1, mode="embedded_gaussian"), True),
    "da": ("DA", _da, True),
    "a2": ("A2", lambda c, r, k: DoubleAttention(c), False),
    "apc": ("APC", _apc, False),
    "dm": ("DM", _dm, False),
    "acf": ("ACF", lambda c, r, k: CooccurrentFeatures(c), True),
    "ema": ("EMA", lambda c, r, k: EMAContext(c, r), False),
    "gc": ("GC", lambda c, r, k: ContextBlock(c, 1 / 4), False),
    "polynl": ("Poly-NL", lambda c, r, k: PolyNL(c), False),
    "attnconv": ("AttnConv", lambda c, r, k: AttnConv(c, 8, 64, 64), True),
}
DEFAULT = [k for k in SPECS if k != "attnconv"]


def _conv_backward(grad_out: Tensor, x: Tensor, w: Tensor, *args: Any, out_val: Any = None) -> int:
    """FLOPs of a convolution's backward: each requested gradient (input, weight) costs one
    forward of the convolution, ``groups`` included."""
    forward = 2 * grad_out.numel() * w.shape[1] * math.prod(w.shape[2:])
    return forward * (int(args[-1][0]) + int(args[-1][1]))  # output_mask: input, weight, bias


class FlopCount(TorchDispatchMode):
    """FLOPs of the products and convolutions a call runs (in-place variants too)."""

    def __enter__(self) -> FlopCount:
        self.flops = 0
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        packet = func._overloadpacket
        if packet is torch.ops.aten.convolution_backward:
            self.flops += _conv_backward(*args, out_val=out)
        elif packet in flop_registry:
            self.flops += flop_registry[packet](*args, **(kwargs or {}), out_val=out)
        return out


def count(module: nn.Module, x: Tensor, grad: Optional[Tensor] = None) -> int:
    """FLOPs of one train-mode forward (``grad`` None) or forward+backward of ``module``."""
    module.train()
    with FlopCount() as counter:
        y = module(x.detach().requires_grad_(grad is not None))
        if grad is not None:
            y.backward(grad)
    module.zero_grad(set_to_none=True)
    return counter.flops


def peak_memory(fn: Callable[[], Any], device: torch.device) -> int:
    """Peak bytes allocated during ``fn()`` above those allocated before it."""
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
        prof.export_chrome_trace(osp.join(tmp, "trace.json"))
        with open(osp.join(tmp, "trace.json")) as f:
            trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    mem = [e for e in events if e.get("name") == "[memory]" and e["args"].get("Device Type") == 0]
    alive = peak = 0
    for e in sorted(mem, key=lambda e: (e["ts"], e["args"].get("Ev Idx", 0))):
        alive += int(e["args"]["Bytes"])
        peak = max(peak, alive)
    return peak


def measure(
    keys: Sequence[str],
    sizes: Sequence[int] = (128,),
    batch: int = 1,
    channels: int = 512,
    device: str = "cpu",
    rank: int = 64,
    steps: int = 6,
    rounds: int = 5,
    memory: bool = True,
    max_pairwise_gb: float = 8.0,
) -> dict[str, Any]:
    """Rows of every module of ``keys`` at every ``size`` (H = W): params, MACs, fwd+bwd FLOPs
    and their ratio, times (all rounds, interleaved), peak memory; log-log slopes against n."""
    dev, rows, calls = torch.device(device), [], []
    for size in sizes:
        for key in keys:
            label, build, quadratic = SPECS[key]
            row = dict(key=key, label=label, size=size, n=size * size)
            if quadratic and 3 * batch * size**4 * 4 / 1e9 > max_pairwise_gb:
                rows.append(dict(row, skipped=f"n x n maps over {max_pairwise_gb} GB"))
                continue
            torch.manual_seed(0)
            module = build(channels, rank, steps).to(dev)
            x = torch.randn(batch, channels, size, size, device=dev)
            with torch.no_grad():
                grad = torch.randn(module.eval()(x).shape, device=dev)
            row["params"] = sum(p.numel() for p in module.parameters())
            row["fwd_flops"], row["train_flops"] = count(module, x), count(module, x, grad)
            row["macs"], row["ratio"] = row["fwd_flops"] // 2, row["train_flops"] / row["fwd_flops"]
            xr = x.clone().requires_grad_(True)

            def infer(m: nn.Module = module, x: Tensor = x) -> None:
                with torch.no_grad():
                    m.eval()(x)

            def train(m: nn.Module = module, xr: Tensor = xr, g: Tensor = grad) -> None:
                m.train().zero_grad(set_to_none=True)
                m(xr).backward(g)

            rows.append(row)
            calls.append((row, dict(infer=infer, train=train)))
    for row, fns in calls:  # warm-up, then rounds in turn
        for fn in fns.values():
            fn()
        row.update(infer_ms=[], train_ms=[])
    for i in range(rounds):
        for row, fns in calls[:: -1 if i % 2 else 1]:
            for name, fn in fns.items():
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                start = time.perf_counter()
                fn()
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                row[f"{name}_ms"].append(1e3 * (time.perf_counter() - start))
    for row, fns in calls if memory else ():
        for name, fn in fns.items():
            row[f"{name}_mib"] = peak_memory(fn, dev) / 2**20
    slopes = {}
    for key in keys:
        mine = [r for r in rows if r["key"] == key and "train_ms" in r]
        pts = [(math.log(r["n"]), math.log(statistics.median(r["train_ms"]))) for r in mine]
        if len(pts) > 1:
            slopes[key] = statistics.linear_regression(*zip(*pts)).slope
    settings = dict(batch=batch, channels=channels, rank=rank, steps=steps, rounds=rounds)
    return dict(
        settings,
        device=device,
        machine=f"{machine()}, {torch.get_num_threads()} threads",
        rows=rows,
        slopes=slopes,
    )


def markdown(result: dict[str, Any]) -> str:
    """The table, then the slopes of fwd+bwd time against n when more than one size ran."""
    med = lambda v: f"{statistics.median(v):.1f}"
    spread = lambda v: f"{100 * (max(v) - min(v)) / statistics.median(v):.0f}%"
    cols = "Module|H=W|Params (M)|MACs (G)|fwd+bwd / fwd FLOPs|Infer ms|Fwd+bwd ms|spread"
    lines = [
        f"| {cols.replace('|', ' | ')} | Infer MiB | Fwd+bwd MiB |",
        "|---" + "|---:" * 9 + "|",
    ]
    for r in result["rows"]:
        if "skipped" in r:
            lines.append(f"| {r['label']} | {r['size']} | skipped: {r['skipped']} |||||||")
            continue
        cells = [r["label"], r["size"], f"{r['params'] / 2**20:.2f}", f"{r['macs'] / 1e9:.2f}"]
        cells += [f"{r['ratio']:.2f}", med(r["infer_ms"]), med(r["train_ms"])]
        cells += [f"{spread(r['infer_ms'])} / {spread(r['train_ms'])}"]
        cells += [f"{r[k]:.0f}" if k in r else "-" for k in ("infer_mib", "train_mib")]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    slopes = result["slopes"].items()
    lines += [f"\nfwd+bwd time against n: slope {s:.2f} ({SPECS[k][0]})" for k, s in slopes]
    r = result
    head = f"{r['machine']}, {r['device']}; B={r['batch']}, C={r['channels']}, r={r['rank']}, "
    head += f"K={r['steps']}; median of {r['rounds']} interleaved rounds; spread: (max - min) / "
    return head + "median, inference / fwd+bwd.\n\n" + "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> None:
    import argparse

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--modules", nargs="+", choices=list(SPECS), default=DEFAULT)
    p.add_argument("--sizes", type=int, nargs="+", default=[PAPER_SHAPE[2]], help="H = W")
    p.add_argument("--channels", type=int, default=PAPER_SHAPE[1])
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, help="torch threads on the CPU")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--out", help="also write the result here (JSON; the table beside it, .md)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    options = dict(rounds=args.rounds, memory=not args.no_memory)
    result = measure(args.modules, args.sizes, 1, args.channels, args.device, **options)
    md = markdown(result)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
        with open(args.out.removesuffix(".json") + ".md", "w", encoding="utf-8") as f:
            f.write(md)
    print(md)


if __name__ == "__main__":
    main()
