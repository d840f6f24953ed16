"""What the benchmarks measure: times, the fp32 matmul rate, peak memory, MACs; their files."""

from __future__ import annotations

import contextlib
import json
import math
import os
import os.path as osp
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from typing import Any, Callable

import torch
from mmengine.analysis import FlopAnalyzer
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from hamseg.models import cuda_graphs
from hamseg.utils.errors import UsageError

MIB = 2**20
#: Operators that are matrix products (the hand count's "conv" + "matmul").
PRODUCT_OPS = ("conv", "bmm", "addmm", "matmul", "mm", "linear", "einsum", "baddbmm")


def machine() -> dict[str, Any]:
    """CPU, cores, threads, Python, torch, CUDA and cuDNN; with CUDA the GPU and its driver."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError, StopIteration), open("/proc/cpuinfo") as f:
        cpu = next(line for line in f if line.startswith("model name")).split(":")[1].strip()
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    info = dict(
        cpu=cpu,
        cores=os.cpu_count(),
        threads=torch.get_num_threads(),
        python=platform.python_version(),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        cudnn=cudnn,
        cuda_available=torch.cuda.is_available(),
    )
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(
            gpu=p.name,
            capability=f"{p.major}.{p.minor}",
            memory_gib=round(p.total_memory / 2**30, 2),
            device_count=torch.cuda.device_count(),
        )
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        with contextlib.suppress(OSError):
            info["driver"] = subprocess.run(query, capture_output=True, text=True).stdout.strip()
    return info


def select_device(name: str, threads: int) -> torch.device:
    """The device ``name`` (``threads`` intra-op threads on the CPU); a bad one is a UsageError."""
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise UsageError(f"--device {name}: {err}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {name}: torch sees no CUDA device here")
    if device.type == "cpu":
        torch.set_num_threads(threads)
    return device


def time_fn(
    fn: Callable[[], Any],
    device: torch.device,
    runs: int,
    warmup: int,
    budget: float = 1e9,
    clock: Callable[[], float] = time.perf_counter,
) -> list[float]:
    """Seconds of ``runs`` calls after ``warmup``, stopping after ``budget`` s once 3 are done;
    CUDA: CUDA events on the current stream (the kernels' time); CPU: by ``clock`` (e.g.
    ``time.thread_time``: this thread's CPU time, which other processes do not stretch)."""
    for _ in range(warmup):
        fn()
    times: list[float] = []
    began = time.perf_counter()
    while len(times) < max(runs, 1):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record(torch.cuda.current_stream(device))
            fn()
            end.record(torch.cuda.current_stream(device))
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t = clock()
            fn()
            times.append(clock() - t)
        if len(times) >= min(3, runs) and time.perf_counter() - began > budget:
            break
    return times


def alternate(
    fns: dict[str, Callable[[], Any]],
    device: torch.device,
    runs: int,
    clock: Callable[[], float] = time.perf_counter,
) -> dict:
    """Seconds of ``runs`` calls of each of ``fns`` after one warm-up each, alternating (the
    order reversed every other run), so that all see the same machine; ``clock`` as in
    :func:`time_fn`."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for i in range(runs):
        for name in list(fns)[:: -1 if i % 2 else 1]:
            times[name] += time_fn(fns[name], device, 1, 0, clock=clock)
    return times


def spread(times: Sequence[float]) -> float:
    """(max - min) / median of timed runs."""
    return (max(times) - min(times)) / statistics.median(times)


def matmul_rate(device: torch.device, size: int = 2048, runs: int = 5) -> float:
    """fp32 matmul rate (FLOP/s): the median of ``runs`` size^3 products (TF32 off)."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    a, b = torch.randn(2, size, size, generator=torch.Generator().manual_seed(0)).to(device)
    out = torch.empty(size, size, device=device)
    times = time_fn(lambda: torch.mm(a, b, out=out), device, runs, 2, budget=30.0)
    return 2.0 * size**3 / statistics.median(times)


def peak_memory(fn: Callable[[], Any], device: torch.device) -> int:
    """Peak bytes allocated during one call of ``fn`` above those before it: CUDA's caching
    allocator's peak; on the CPU, of the running sum of the allocations ``torch.profiler`` sees."""
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
    mem.sort(key=lambda e: (e["ts"], e["args"].get("Ev Idx", 0)))
    alive = peak = 0
    for e in mem:
        alive += int(e["args"]["Bytes"])
        peak = max(peak, alive)
    return peak


def hamburger_macs(
    shape: tuple[int, ...], kind: str, r: int, k: int, variant: str = "paper", path: str = "paper"
) -> dict[str, int]:
    """Hand count of a Hamburger's conv and matmul MACs ('conv', 'matmul', 'total'; one forward,
    K steps, S = 1, d = C, n = H W; paper Sec. 2.2, Alg. 1-3). Breads 2 C d n (+ d^2 n, the
    release's cheese). NMF: init D^T X, n d r; per step 2 n d r + 2 d r^2 + 2 n r^2; final n d r
    + d r^2 + n r^2. CD: per step 2 n d r; final d r^2 + d r n (solve uncounted). VQ: per step
    2 n d r; final n d r. Then D C (d r n). ``path``: 'paper' (as written); 'module' (what the
    hams run: NMF's initial codes come from the first update's D^T X, n d r less); 'fast'
    ('module' in inference at >= ``Hamburger.fast_path_min_positions``): the next bread
    multiplies (W D) C, C_out d r + C_out r n instead of d r n + C_out d n."""
    b, c, h, w = shape
    d = c
    n = h * w
    conv = 2 * c * d * n + (d * d * n if variant == "release" else 0)
    if kind == "NMF":
        step = 2 * n * d * r + 2 * n * r * r + 2 * d * r * r
        shared = 0 if path == "paper" else n * d * r  # the initial codes' D^T X
        ham = n * d * r - shared + k * step + (n * d * r + d * r * r + n * r * r) + d * r * n
    elif kind == "CD":
        ham = k * 2 * n * d * r + (d * r * r + d * r * n) + d * r * n
    elif kind == "VQ":
        ham = k * 2 * n * d * r + n * d * r + d * r * n
    else:
        raise ValueError(f"unknown ham {kind!r}")
    if path not in ("paper", "module", "fast"):
        raise ValueError(f"unknown path {path!r}")
    if path == "fast":
        c_out = d if variant == "release" else c  # the cheese (d -> d) or the upper bread
        conv -= c_out * d * n
        ham += -d * r * n + c_out * d * r + c_out * r * n
    return {"conv": b * conv, "matmul": b * ham, "total": b * (conv + ham)}


def count_macs(module: nn.Module, x: Any) -> tuple[int, dict[str, int]]:
    """MACs of one eval forward by mmengine's ``FlopAnalyzer`` (conv, (b)mm, einsum, norms; no
    element-wise ops), in total and by operator."""
    module.eval()
    with torch.no_grad():
        analyzer = FlopAnalyzer(module, (x,))
        analyzer.unsupported_ops_warnings(False)
        analyzer.uncalled_modules_warnings(False)
        return int(analyzer.total()), {k: int(v) for k, v in analyzer.by_operator().items()}


class _RunFlops(TorchDispatchMode):
    """FLOPs of the operators a call runs (``torch.utils.flop_counter``'s formulas, in-place
    variants too), without module hooks: a hook-free fast path and CPU backward ops count."""

    flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        packet = func._overloadpacket
        if packet not in flop_registry and packet.__name__.endswith("_"):
            packet = getattr(torch.ops.aten, packet.__name__[:-1], packet)
        if packet in flop_registry:
            self.flops += flop_registry[packet](*args, **(kwargs or {}), out_val=out)
        return out


def count_run_macs(module: nn.Module, x: Tensor) -> int:
    """MACs of one inference call (eval, no autograd) as it runs."""
    module.eval()
    with torch.no_grad(), cuda_graphs.disabled(), _RunFlops() as counter:
        module(x)  # eager: a CUDA graph's capture would run the ham four times
    return counter.flops // 2


def count_train_flops(module: nn.Module, x: Tensor, grad: Tensor) -> int:
    """FLOPs (2 per MAC) of one forward+backward in train mode."""
    module.train()
    with _RunFlops() as counter:
        module(x.detach().clone().requires_grad_(True)).backward(grad)
    module.zero_grad(set_to_none=True)
    return counter.flops


def fmt(v: Any, spec: str = ".1f") -> str:
    """``v`` formatted with ``spec``; '-' for a missing (None or NaN) value."""
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def table(cols: Sequence[str], rows: Iterable[Sequence[Any] | str], align: str = "") -> list[str]:
    """Markdown table lines: ``cols``, then ``rows`` (cells, or a line as is); ``align`` 'l'/'r'
    per column gives ``|---|---:|``, else ``| --- |``."""
    sep = "".join("|---:" if a == "r" else "|---" for a in align) + "|" if align else None
    return [
        "| " + " | ".join(cols) + " |",
        sep or "| --- " * len(cols) + "|",
        *(r if isinstance(r, str) else "| " + " | ".join(map(str, r)) + " |" for r in rows),
    ]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the file-only Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str) -> None:
    """Lay out ``fig``, write it to ``path`` (PNG, 110 dpi) and free it."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)


def write_report(
    base: str,
    text: str,
    result: dict[str, Any],
    plot: Callable[[dict, str], None] | None = None,
    indent: int = 1,
) -> list[str]:
    """Write ``base``.md (``text``), ``base``.json (``result``, the rest as strings) and, with
    ``plot(result, path)``, ``base``.png; returns the paths."""
    os.makedirs(osp.dirname(base) or ".", exist_ok=True)
    files = [base + ".md", base + ".json"] + ([base + ".png"] if plot else [])
    with open(files[0], "w", encoding="utf-8") as f:
        f.write(text)
    with open(files[1], "w", encoding="utf-8") as f:
        json.dump(result, f, indent=indent, default=str)
    if plot is not None:
        plot(result, files[2])
    return files
