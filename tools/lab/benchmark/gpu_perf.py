"""Where a training iteration and an evaluation spend their time on a GPU ([gpu], docs/gpu.md):
the recipe's iteration under every switch that may speed it up, measured side by side in one
process, a profile of its top operators, the Hamburger alone, the evaluation draws and the
multi-scale + flip test. ``tools/benchmark_gpu.py`` writes the tables; every part also runs on
the CPU at small sizes (the tests)."""

from __future__ import annotations

import contextlib
import copy
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from mmengine.dataset import Compose, pseudo_collate
from mmengine.optim import build_optim_wrapper
from mmseg.registry import MODELS
from torch import nn

from hamseg.models import Hamburger, cuda_graphs
from hamseg.models.fused_hamburger import FASTER_ON, PointwiseConv
from hamseg.models.light_hamburger import LightHamburger

from .measure import MIB, alternate, spread, time_fn
from .models import build_for_training, synthetic_batch

PRECISIONS = dict(fp32=None, fp16="float16", bf16="bfloat16")


@dataclass(frozen=True)
class Switches:
    """One way to run: autocast ``precision``, ``channels_last`` weights (the activations
    follow), cuDNN's autotuner (``cudnn_benchmark``, as mmengine's ``env_cfg``), TF32 matrix
    products (``tf32_matmul``), AmpOptimWrapper's dynamic loss scaler (``loss_scale``; False:
    ``loss_scale=dict(enabled=False)``, which bf16 does not need), SGD's fused kernel
    (``fused_sgd``), and hamseg's speed paths: ``pointwise`` (PointwiseConv's matrix products)
    and ``fused`` ((W D) C inference) on every device (True), nowhere (False) or where shipped
    (None: the CPU), ``cuda_graphs`` (the hams' inference replayed as CUDA graphs)."""

    precision: str = "fp32"
    channels_last: bool = False
    cudnn_benchmark: bool = True
    tf32_matmul: bool = False
    loss_scale: bool = True
    fused_sgd: bool = False
    pointwise: bool | None = None
    fused: bool | None = None
    cuda_graphs: bool = True

    @property
    def label(self) -> str:
        words = dict(pointwise="PointwiseConv", fused="fused path")
        parts = [self.precision, "channels_last" if self.channels_last else "NCHW"]
        parts += [] if self.cudnn_benchmark else ["no autotune"]
        parts += ["TF32 matmul"] if self.tf32_matmul else []
        parts += [] if self.loss_scale else ["no loss scaler"]
        parts += ["fused SGD"] if self.fused_sgd else []
        for name, word in words.items():
            on = getattr(self, name)
            parts += [] if on is None else [f"{word} {'everywhere' if on else 'off'}"]
        return ", ".join(parts + ([] if self.cuda_graphs else ["no CUDA graphs"]))


def _devices(on: bool | None) -> tuple[str, ...]:
    return FASTER_ON if on is None else ("cpu", "cuda") if on else ()


@contextlib.contextmanager
def switched(s: Switches) -> Iterator[None]:
    """The global switches of ``s`` for the duration of the block."""
    blocks = (Hamburger, LightHamburger)
    saved = (
        torch.backends.cudnn.benchmark,
        torch.backends.cuda.matmul.allow_tf32,
        PointwiseConv.devices,
        [b.fast_path_devices for b in blocks],
        cuda_graphs.enabled,
    )
    torch.backends.cudnn.benchmark = s.cudnn_benchmark
    torch.backends.cuda.matmul.allow_tf32 = s.tf32_matmul
    PointwiseConv.devices = _devices(s.pointwise)
    for block in blocks:
        block.fast_path_devices = _devices(s.fused)
    cuda_graphs.enabled = s.cuda_graphs
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32 = saved[:2]
        PointwiseConv.devices = saved[2]
        for block, devices in zip(blocks, saved[3]):
            block.fast_path_devices = devices
        cuda_graphs.enabled = saved[4]


class IterationBench:
    """One model of ``config`` (train mode, no pretrained weights, SyncBN as BN) on one synthetic
    batch, timed under any :class:`Switches`: ``train_step`` (preprocessing, forward, loss,
    backward, SGD step) and the decode head's loss forward+backward on detached features."""

    def __init__(self, config: str, batch: int, size: int, device: torch.device) -> None:
        self.device = device
        self.model, _, self.cfg = build_for_training(config, size, device)
        self.data = synthetic_batch(batch, size, self.model.decode_head.num_classes)
        self.batch = batch
        self.size = size
        self._wrappers: dict[tuple, Any] = {}  # see wrapper()

    def wrapper(self, s: Switches) -> Any:
        """The config's optimizer wrapper; fp16/bf16 as mmengine's AmpOptimWrapper. One per
        layout too: the optimizer's state keeps the memory format of the weights at its first step
        (shared, a channels_last row ran with NCHW momentum, and fused SGD refused the mix)."""
        key = (s.precision, s.loss_scale, s.fused_sgd, s.channels_last)
        if key not in self._wrappers:
            cfg = copy.deepcopy(self.cfg.optim_wrapper)
            if s.fused_sgd:
                cfg.optimizer.update(fused=True)
            if PRECISIONS[s.precision]:
                cfg.update(type="AmpOptimWrapper", dtype=PRECISIONS[s.precision])
                if not s.loss_scale:
                    cfg.update(loss_scale=dict(enabled=False))
            self._wrappers[key] = build_optim_wrapper(self.model, cfg)
        return self._wrappers[key]

    def layout(self, channels_last: bool) -> None:
        fmt = torch.channels_last if channels_last else torch.contiguous_format
        self.model.to(memory_format=fmt)

    def step_fn(self, s: Switches) -> Callable[[], float]:
        """One ``train_step`` under ``s`` (switches set by the caller); returns the loss tensor."""
        wrapper = self.wrapper(s)
        return lambda: self.model.train_step(self.data, wrapper)["loss"]

    def head_fn(self, s: Switches) -> Callable[[], None]:
        """The decode head's loss forward+backward on this batch's features (computed once)."""
        wrapper = self.wrapper(s)
        batch = self.model.data_preprocessor(self.data, True)
        with torch.no_grad(), wrapper.optim_context(self.model):
            feats = [f.detach().requires_grad_() for f in self.model.extract_feat(batch["inputs"])]

        def head_step() -> None:
            with wrapper.optim_context(self.model):
                terms = self.model.decode_head.loss(
                    feats, batch["data_samples"], self.model.train_cfg
                )
            self.model.parse_losses(terms)[0].backward()

        return head_step

    def measure(self, s: Switches, iters: int, warmup: int) -> dict[str, Any]:
        """Seconds per iteration and per head step (all runs), peak memory, last loss."""
        self.layout(s.channels_last)
        with switched(s):
            step = self.step_fn(s)
            losses: list[float] = []
            began = time.perf_counter()
            for _ in range(warmup):
                losses.append(float(step()))
            warm_s = time.perf_counter() - began
            if self.device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(self.device)
            times = time_fn(lambda: losses.append(float(step())), self.device, iters, 0)
            peak = None
            if self.device.type == "cuda":
                peak = torch.cuda.max_memory_allocated(self.device) / MIB
            head = time_fn(self.head_fn(s), self.device, iters, 1)
        return dict(
            label=s.label,
            switches=s.__dict__,
            iter_s=times,
            head_s=head,
            warmup_s=warm_s,
            peak_mib=peak,
            loss=losses[-1],
        )


def iteration_rows(
    bench: IterationBench,
    variants: Sequence[Switches],
    iters: int = 8,
    warmup: int = 2,
    rounds: int = 2,
) -> list[dict[str, Any]]:
    """Each variant measured ``rounds`` times, round after round over all variants (a drift of
    the machine shows as a difference between rounds); medians over all rounds, ratio to the
    first variant, head share."""
    runs: dict[Switches, list[dict[str, Any]]] = {v: [] for v in variants}
    for r in range(rounds):
        for v in variants:
            print(f"[gpu_perf] round {r + 1}: {v.label}", flush=True)
            runs[v].append(bench.measure(v, iters, warmup if r == 0 else 1))
    rows = []
    for measured in runs.values():
        it = [t for m in measured for t in m["iter_s"]]
        head = [t for m in measured for t in m["head_s"]]
        row = dict(measured[-1], iter_s=it, head_s=head)
        row.update(iter_ms=1e3 * statistics.median(it), head_ms=1e3 * statistics.median(head))
        row["round_ms"] = [1e3 * statistics.median(m["iter_s"]) for m in measured]
        row["spread"] = spread(it)
        row["head_share"] = row["head_ms"] / row["iter_ms"]
        rows.append(row)
    for row in rows:
        row["speedup_vs_first"] = rows[0]["iter_ms"] / row["iter_ms"]
    return rows


#: Operator families of a profile: the first whose key is in an operator's name decides.
FAMILIES = (
    ("convolution", ("conv",)),
    ("batch norm", ("batch_norm",)),
    ("matrix product", ("bmm", "mm", "matmul", "linear")),
    ("dtype cast / copy", ("_to_copy", "copy_", "clone", "contiguous")),
    ("loss", ("nll", "log_softmax", "cross_entropy")),
    ("interpolation", ("upsample", "interpolate")),
    ("optimizer", ("_foreach",)),
)


def family(name: str) -> str:
    """The :data:`FAMILIES` entry of an ``aten::`` operator name, else 'other'.

    >>> family("aten::cudnn_convolution"), family("aten::_to_copy"), family("aten::relu_")
    ('convolution', 'dtype cast / copy', 'other')
    """
    op = name.split("::")[-1]
    return next((fam for fam, keys in FAMILIES if any(k in op for k in keys)), "other")


def profile_iteration(
    bench: IterationBench, s: Switches, steps: int = 3, top: int = 12
) -> dict[str, Any]:
    """``torch.profiler`` over ``steps`` iterations (after 2 warm-ups): wall ms per iteration,
    device-busy ms per iteration (the kernels' total), the top operators by their own device
    time (CPU time without CUDA) and the device time by operator family."""
    from torch.profiler import ProfilerActivity, profile

    bench.layout(s.channels_last)
    cuda = bench.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with switched(s):
        step = bench.step_fn(s)
        for _ in range(2):
            step()
        if cuda:
            torch.cuda.synchronize(bench.device)
        with profile(activities=activities) as prof:
            began = time.perf_counter()
            for _ in range(steps):
                step()
            if cuda:
                torch.cuda.synchronize(bench.device)
            wall = (time.perf_counter() - began) / steps
    events = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    attr = "self_cpu_time_total"
    if cuda:  # torch < 2.4 names it self_cuda_time_total
        attr = (
            "self_device_time_total"
            if hasattr(events[0], "self_device_time_total")
            else "self_cuda_time_total"
        )
    own = lambda e: getattr(e, attr)  # noqa: E731  (microseconds over all steps)
    busy_us = sum(own(e) for e in events) / steps
    ops = sorted(events, key=own, reverse=True)
    by_family: dict[str, float] = {}
    for e in ops:
        by_family[family(e.key)] = by_family.get(family(e.key), 0.0) + own(e) / steps / 1e3
    top_ops = [
        dict(
            op=e.key,
            ms=own(e) / steps / 1e3,
            calls=e.count // steps,
            share=own(e) / steps / busy_us,
        )
        for e in ops[:top]
        if busy_us
    ]
    return dict(
        label=s.label,
        switches=s.__dict__,
        wall_ms=1e3 * wall,
        busy_ms=busy_us / 1e3,
        busy_share=busy_us / 1e6 / wall,
        top=top_ops,
        families=dict(sorted(by_family.items(), key=lambda kv: -kv[1])),
        kernel_time="device" if cuda else "cpu",
    )


def hamburger_inference_rows(
    shape: tuple[int, int, int, int],
    device: torch.device,
    rank: int = 64,
    steps: int = 6,
    runs: int = 30,
) -> list[dict[str, Any]]:
    """Inference (eval, no autograd) of a Hamburger at ``shape``, all rows alternating: mmseg's
    (LightHamHead's block, the peer of Table 3) and hamseg's 'paper' NMF block (one random draw
    per forward): as shipped, with the speed paths of hamseg 0.x before [gpu] (PointwiseConv and
    the fused path on every device, no CUDA graphs), and with each switch flipped.
    ``ratio_to_mmseg``: time over mmseg's."""
    from .zoo import SPECS

    torch.manual_seed(0)
    ours = SPECS["ham_nmf"].build(shape[1], rank, steps).to(device).eval()
    peer = SPECS["mmseg_ham"].build(shape[1], rank, steps).to(device).eval()
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(device)

    def call(module: nn.Module, s: Switches) -> Callable[[], None]:
        def run() -> None:
            with switched(s), torch.no_grad():
                module(x)

        return run

    S = Switches
    variants = {
        "hamseg, as shipped": S(),
        "hamseg, before [gpu]": S(pointwise=True, fused=True, cuda_graphs=False),
        "hamseg, no CUDA graphs": S(cuda_graphs=False),
        "hamseg, PointwiseConv everywhere": S(pointwise=True),
        "hamseg, fused path everywhere": S(fused=True),
        "hamseg, TF32 products": S(tf32_matmul=True),
    }
    fns = {"mmseg Hamburger (NMF2D)": call(peer, S())}
    fns.update({name: call(ours, s) for name, s in variants.items()})
    times = alternate(fns, device, runs)
    peer_ms = 1e3 * statistics.median(times["mmseg Hamburger (NMF2D)"])
    rows = []
    for name, t in times.items():
        ms = 1e3 * statistics.median(t)
        rows.append(dict(label=name, ms=ms, spread=spread(t), ratio_to_mmseg=ms / peer_ms))
    return rows


def draw_rows(
    shape: tuple[int, int, int, int], device: torch.device, draws: int = 12, runs: int = 30
) -> list[dict[str, Any]]:
    """Inference of HamHead's Hamburger (release variant, NMF r=64, K=6) at ``shape``: one
    random draw per forward (the paper's protocol), one seeded draw, ``draws`` seeded draws
    (the shipped default), each with float32 and TF32 products, with and without CUDA graphs,
    alternating; ``ratio_to_one``: time over one seeded draw with the same setting."""
    torch.manual_seed(0)
    x = torch.relu(torch.randn(shape, generator=torch.Generator().manual_seed(1))).to(device)

    def block(**ham: Any) -> nn.Module:
        cfg = dict(type="NMF", R=64, train_steps=6, eval_steps=6, **ham)
        return Hamburger(shape[1], ham_cfg=cfg, variant="release").to(device).eval()

    blocks = {
        "1 random draw (paper)": block(),
        "1 seeded draw": block(eval_seed=0, eval_draws=1),
        f"{draws} seeded draws (shipped)": block(eval_seed=0, eval_draws=draws),
    }
    fns = {}
    settings = [Switches(), Switches(tf32_matmul=True), Switches(cuda_graphs=False)]
    settings += [Switches(tf32_matmul=True, cuda_graphs=False)]
    for s in settings:
        for name, module in blocks.items():

            def run(module: nn.Module = module, s: Switches = s) -> None:
                with switched(s), torch.no_grad():
                    module(x)

            fns[(name, s)] = run
    times = alternate(fns, device, runs)
    rows = []
    for (name, s), t in times.items():
        one = statistics.median(times[("1 seeded draw", s)])
        row = dict(
            label=name, setting=s.label, tf32_matmul=s.tf32_matmul, ms=1e3 * statistics.median(t)
        )
        rows.append(dict(row, spread=spread(t), ratio_to_one=statistics.median(t) / one))
    return rows


def hamburger_train_rows(
    shape: tuple[int, int, int, int], device: torch.device, runs: int = 20
) -> list[dict[str, Any]]:
    """Forward+backward (train mode) of HamHead's Hamburger at ``shape`` under fp32 and autocast
    fp16/bf16, as shipped and with PointwiseConv everywhere, alternating."""
    torch.manual_seed(0)
    cfg = dict(type="NMF", R=64, train_steps=6, eval_steps=6)
    module = Hamburger(shape[1], ham_cfg=cfg, variant="release").to(device).train()
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(device)
    x.requires_grad_(True)
    fns = {}
    for precision in PRECISIONS:
        for pointwise in (None, True):
            s = Switches(precision=precision, pointwise=pointwise)

            def run(s: Switches = s) -> None:
                dtype = getattr(torch, PRECISIONS[s.precision] or "float32")
                with switched(s), torch.autocast(device.type, dtype, enabled=s.precision != "fp32"):
                    y = module(x)
                y.float().sum().backward()
                module.zero_grad(set_to_none=True)
                x.grad = None

            fns[s.label] = run
    times = alternate(fns, device, runs)
    return [
        dict(label=k, ms=1e3 * statistics.median(t), spread=spread(t)) for k, t in times.items()
    ]


def msflip_rows(
    config: str,
    device: torch.device,
    image_hw: tuple[int, int] = (375, 500),
    draws: Sequence[int] = (1, 12),
    runs: int = 3,
    variants: Sequence[Switches] = (Switches(),),
) -> list[dict[str, Any]]:
    """Seconds per image of the config's multi-scale + flip test (``tta_model``, the label-free
    ``tta_pipeline``'s views, one random image of ``image_hw``) with each number of seeded
    draws and each of ``variants``: the views' preparation (CPU) and ``test_step`` (the views'
    forwards and the merge)."""
    import cv2
    from mmengine.config import Config
    from mmengine.registry import init_default_scope

    cfg = Config.fromfile(config)
    init_default_scope(cfg.get("default_scope", "mmseg"))
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.pretrained = None
    model_cfg.backbone.init_cfg = None
    torch.manual_seed(0)
    segmentor = MODELS.build(model_cfg)
    segmentor.init_weights()
    tta = MODELS.build(dict(copy.deepcopy(cfg.tta_model), module=segmentor)).to(device).eval()
    rng = np.random.default_rng(0)
    path = f"/tmp/hamseg_msflip_{image_hw[0]}x{image_hw[1]}.jpg"
    cv2.imwrite(path, rng.integers(0, 256, (*image_hw, 3), dtype=np.uint8))
    pipeline = Compose(cfg.get("label_free_tta_pipeline", cfg.tta_pipeline))
    began = time.perf_counter()
    data = pseudo_collate([pipeline(dict(img_path=path))])
    prep_s = time.perf_counter() - began
    views = len(data["inputs"])
    ham = segmentor.decode_head.hamburger.ham
    rows = []
    for s in variants:
        fmt = torch.channels_last if s.channels_last else torch.contiguous_format
        tta.to(memory_format=fmt)
        for k in draws:
            ham.eval_draws = k
            copies = [copy.deepcopy(data) for _ in range(runs + 1)]  # test_step edits samples
            with switched(s), torch.no_grad():
                t = time_fn(lambda c=copies: tta.test_step(c.pop()), device, runs, 1)
            row = dict(label=s.label, draws=k, views=views, s_per_image=statistics.median(t))
            rows.append(dict(row, prep_s=prep_s))
    for row in rows:
        row["ratio_to_first"] = row["s_per_image"] / rows[0]["s_per_image"]
    return rows


def compile_rows(
    bench: IterationBench, variants: Sequence[Switches], iters: int = 8, warmup: int = 2
) -> list[dict[str, Any]]:
    """Each variant eager, then with ``train_step`` compiled as mmengine's ``compile=True`` does
    (``torch.compile`` of the bound method, default options): seconds of the first compiled call
    (the compilation), of the next ``warmup`` calls, steady-state iteration time, losses."""
    rows = []
    eager_step = bench.model.train_step
    for v in variants:
        bench.layout(v.channels_last)
        with switched(v):
            bench.model.train_step = eager_step
            step = bench.step_fn(v)
            for _ in range(warmup):
                step()
            eager = time_fn(step, bench.device, iters, 0)
            bench.model.train_step = torch.compile(eager_step)
            step = bench.step_fn(v)
            began = time.perf_counter()
            first_loss = float(step())
            first_s = time.perf_counter() - began
            began = time.perf_counter()
            for _ in range(warmup):
                step()
            if bench.device.type == "cuda":
                torch.cuda.synchronize(bench.device)
            warm_s = time.perf_counter() - began
            compiled = time_fn(step, bench.device, iters, 0)
            last_loss = float(step())
        bench.model.train_step = eager_step
        eager_ms, compiled_ms = (1e3 * statistics.median(t) for t in (eager, compiled))
        rows.append(
            dict(
                label=v.label,
                switches=v.__dict__,
                eager_ms=eager_ms,
                compiled_ms=compiled_ms,
                speedup=eager_ms / compiled_ms,
                compile_s=first_s,
                next_calls_s=warm_s,
                first_loss=first_loss,
                last_loss=last_loss,
                spread=max(spread(eager), spread(compiled)),
            )
        )
    return rows


def compiled_hamburger_rows(
    shape: tuple[int, int, int, int], device: torch.device, runs: int = 30
) -> list[dict[str, Any]]:
    """Inference of the Table 3 Hamburger (:func:`hamburger_inference_rows`'s 'paper' NMF
    block) eager and ``torch.compile``'d (default mode; 'reduce-overhead', CUDA graphs, on CUDA):
    compile seconds (first call) and steady ms, alternating."""
    from .zoo import SPECS

    torch.manual_seed(0)
    module = SPECS["ham_nmf"].build(shape[1], 64, 6).to(device).eval()
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(device)
    modes = ["default"] + (["reduce-overhead"] if device.type == "cuda" else [])
    fns: dict[str, Callable[[], None]] = {"eager": lambda: module(x)}
    compile_s = {}
    with torch.no_grad():
        for mode in modes:
            compiled = torch.compile(module, mode=mode)
            began = time.perf_counter()
            compiled(x)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            compile_s[mode] = time.perf_counter() - began
            fns[mode] = lambda compiled=compiled: compiled(x)
        times = alternate(fns, device, runs)
    eager = statistics.median(times["eager"])
    return [
        dict(
            label=name,
            ms=1e3 * statistics.median(t),
            spread=spread(t),
            ratio_to_eager=statistics.median(t) / eager,
            compile_s=compile_s.get(name),
        )
        for name, t in times.items()
    ]
