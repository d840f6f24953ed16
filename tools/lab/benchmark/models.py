"""Whole models on a synthetic batch, built as a one-process run builds them: training
iterations side by side, one full-size recipe iteration, SegNeXt-T ours vs mmseg's."""

from __future__ import annotations

import copy
import os
import os.path as osp
import resource
import statistics
from collections.abc import Sequence
from typing import Any, Callable

import torch
from mmengine.config import Config
from mmengine.model import revert_sync_batchnorm
from mmengine.optim import OptimWrapper, build_optim_wrapper
from mmengine.registry import init_default_scope
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample
from torch import nn

from hamseg.compat.package_lookup import config_file

from .measure import MIB, alternate, fmt, peak_memory, spread, table, time_fn

#: The checkout these tools run from (tools/lab/benchmark/../../..): relative config paths are
#: resolved against it.
REPO = osp.abspath(osp.join(osp.dirname(__file__), "..", "..", ".."))
#: HamNet's VOC recipe (ResNet-101 OS8 + HamHead) and mmseg's NonLocal R101-D8 on VOC.
HAM = "configs/ham_voc.py"
NONLOCAL = "mmseg::nonlocal_net/nonlocal_r101-d8_4xb4-40k_voc12aug-512x512.py"
SEGNEXT = "segnext/segnext_mscan-t_1xb16-adamw-160k_ade20k-512x512.py"


def resolve(config: str) -> str:
    """Path of a config: a packaged name (``mmseg::x``) is that package's, a relative path the
    checkout's."""
    return config_file(config) if "::" in config else osp.join(REPO, config)


def build_for_training(
    config: str, size: int, device: torch.device, no_aux: bool = False
) -> tuple[Any, OptimWrapper, Config]:
    """Model (train mode, no pretrained weights, SyncBN as BN, padded to ``size``, ``no_aux``:
    without auxiliary heads), optim wrapper and config of a config file."""
    cfg = Config.fromfile(config)
    init_default_scope(cfg.get("default_scope", "mmseg"))
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.pretrained = None
    model_cfg.backbone.init_cfg = None
    if model_cfg.data_preprocessor.get("size"):  # else a smaller size is padded to the crop
        model_cfg.data_preprocessor.size = (size, size)
    if no_aux:
        model_cfg.pop("auxiliary_head", None)
    torch.manual_seed(0)
    model = revert_sync_batchnorm(MODELS.build(model_cfg))
    model.init_weights()
    model = model.to(device).train()
    return model, build_optim_wrapper(model, cfg.optim_wrapper), cfg


def synthetic_batch(batch: int, size: int, num_classes: int, seed: int = 0) -> dict:
    """What the data loader yields after PackSegInputs: uint8 BGR images, labels with 5% 255s."""
    gen = torch.Generator().manual_seed(seed)
    inputs = []
    samples = []
    for _ in range(batch):
        inputs.append(torch.randint(0, 256, (3, size, size), dtype=torch.uint8, generator=gen))
        label = torch.randint(0, num_classes, (1, size, size), generator=gen)
        label[torch.rand(label.shape, generator=gen) < 0.05] = 255
        meta = dict(img_shape=(size, size), ori_shape=(size, size), pad_shape=(size, size))
        samples.append(SegDataSample(gt_sem_seg=PixelData(data=label), metainfo=meta))
    return dict(inputs=inputs, data_samples=samples)


def default_label(config: str) -> str:
    """A row label: HamNet for :data:`HAM`, else the config's file name."""
    return "HamNet (HamHead NMF)" if config == HAM else osp.splitext(osp.basename(config))[0]


def measure_model(
    config: str,
    label: str,
    size: int,
    device: torch.device,
    batch: int = 1,
    iters: int = 3,
    warmup: int = 1,
    memory: bool = True,
    no_aux: bool = False,
) -> dict[str, Any]:
    """Params, seconds per ``train_step`` (median, all, spread), peak memory; synthetic batch."""
    model, optim_wrapper, _ = build_for_training(resolve(config), size, device, no_aux)
    data = synthetic_batch(batch, size, model.decode_head.num_classes)
    row: dict[str, Any] = dict(label=label, config=config, aux_head=model.with_auxiliary_head)
    row["params"] = sum(p.numel() for p in model.parameters())
    step = lambda: model.train_step(data, optim_wrapper)
    row["iter_s_all"] = t = time_fn(step, device, iters, warmup)
    row.update(iter_s=statistics.median(t), spread=spread(t))
    if memory:
        row["peak_mem_mb"] = peak_memory(step, device) / MIB
    return row


def run_models(
    configs: Sequence[str],
    labels: Sequence[str] | None = None,
    aux_variant: bool = True,
    **settings: Any,
) -> dict[str, Any]:
    """``env``, ``rows`` (:func:`measure_model`, ``ratio_to_first``); ``aux_variant``: also those
    with an auxiliary head without it."""
    rows = []
    for config, label in zip(configs, labels or [default_label(c) for c in configs]):
        print(f"[benchmark_model] {label} ...", flush=True)
        rows.append(measure_model(config, label, **settings))
        if rows[-1]["aux_head"] and aux_variant:
            print(f"[benchmark_model] {label} without auxiliary head ...", flush=True)
            rows.append(measure_model(config, f"{label} (no aux head)", **settings, no_aux=True))
    for r in rows:
        r["ratio_to_first"] = r["iter_s"] / rows[0]["iter_s"]
    env = dict(batch=1, iters=3, warmup=1, memory=True) | settings
    env.update(device=str(env["device"]), threads=torch.get_num_threads(), torch=torch.__version__)
    return dict(env=env, rows=rows)


def model_markdown(result: dict[str, Any]) -> str:
    """The rows as a markdown table under a line saying what was measured."""
    env = result["env"]
    cols = (
        "Model",
        "Config",
        "Aux head",
        "Params (M)",
        "s / iter",
        "x first",
        "Peak mem (MiB)",
        "spread",
    )
    rows = [
        (
            r["label"],
            f"`{r['config']}`",
            "yes" if r["aux_head"] else "no",
            f"{r['params'] / 1e6:.2f}",
            f"{r['iter_s']:.2f}",
            f"{r['ratio_to_first']:.2f}",
            fmt(r.get("peak_mem_mb"), ".0f"),
            f"{100 * r['spread']:.0f}%",
        )
        for r in result["rows"]
    ]
    lines = [
        f"One training iteration (train_step: forward, loss, backward, optimizer step), input "
        f"{env['batch']}x3x{env['size']}x{env['size']}, {env['device']}, {env['threads']} "
        f"threads, median of {env['iters']} after {env['warmup']} warm-up; spread: "
        "(max - min) / median.",
        "",
        *table(cols, rows, "lll" + "r" * 5),
    ]
    return "\n".join(lines) + "\n"


def train_iter(
    config: str,
    batch_size: int | None,
    size: int,
    iters: int,
    device: str = "cpu",
    precision: str = "fp32",
) -> dict[str, Any]:
    """``iters`` ``train_step`` of ``config`` on ``batch_size`` (default: the config's) images of
    ``size``^2, then as many of the decode head alone (loss fwd+bwd on features kept from one
    forward), each timed by :func:`~.measure.time_fn`; fp16/bf16: AmpOptimWrapper. Memory:
    CUDA peak, or RSS before and the process's peak (``ru_maxrss``: run it in a fresh process)."""
    dev = torch.device(device)
    model, _, cfg = build_for_training(config, size, dev)
    wrapper = copy.deepcopy(cfg.optim_wrapper)
    if precision != "fp32":
        wrapper.update(
            type="AmpOptimWrapper", dtype=dict(fp16="float16", bf16="bfloat16")[precision]
        )
    optim_wrapper = build_optim_wrapper(model, wrapper)
    batch = batch_size or cfg.train_dataloader.batch_size
    data = synthetic_batch(batch, size, model.decode_head.num_classes)
    with open("/proc/self/statm") as f:
        rss_before = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MIB
    losses: list[float] = []
    times = time_fn(
        lambda: losses.append(model.train_step(data, optim_wrapper)["loss"].item()), dev, iters, 0
    )
    peak_cuda = torch.cuda.max_memory_allocated(dev) / MIB if dev.type == "cuda" else None
    batch_in = model.data_preprocessor(data, True)
    with torch.no_grad(), optim_wrapper.optim_context(model):
        feats = [f.detach().requires_grad_() for f in model.extract_feat(batch_in["inputs"])]

    def head_step() -> None:
        with optim_wrapper.optim_context(model):
            terms = model.decode_head.loss(feats, batch_in["data_samples"], model.train_cfg)
        model.parse_losses(terms)[0].backward()  # the sum train_step back-propagates

    head_times = time_fn(head_step, dev, iters, 0)
    result = dict(config=osp.relpath(osp.abspath(config), REPO), batch_size=batch, size=size)
    result.update(iters=iters, seconds_per_iter=times, loss=losses, head_seconds=head_times)
    result.update(device=device, precision=precision, peak_cuda_mib=peak_cuda)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    result.update(rss_before_mib=round(rss_before, 1), peak_rss_mib=round(peak, 1))
    params_m = round(sum(p.numel() for p in model.parameters()) / 1e6, 2)
    return dict(result, threads=torch.get_num_threads(), torch=torch.__version__, params_m=params_m)


def train_iter_summary(result: dict[str, Any]) -> str:
    """A :func:`train_iter` result as aligned ``name  value`` lines."""
    r = result
    it = statistics.median(r["seconds_per_iter"])
    head = statistics.median(r["head_seconds"])
    memory = (
        f"{r['peak_cuda_mib']:.0f} MiB allocated (CUDA peak)"
        if r["peak_cuda_mib"] is not None
        else f"{r['rss_before_mib']:.0f} / {r['peak_rss_mib']:.0f} MiB (RSS before / peak)"
    )
    rows = [
        ("config", r["config"]),
        ("batch x size", f"{r['batch_size']} x {r['size']}x{r['size']}"),
        ("device, precision", f"{r['device']}, {r['precision']}"),
        ("parameters", f"{r['params_m']} M"),
        ("seconds / iteration", ", ".join(f"{t:.3f}" for t in r["seconds_per_iter"])),
        ("decode head fwd+bwd", f"{head:.3f} s median, {100 * head / it:.1f}% of the iteration"),
        ("loss", ", ".join(f"{v:.4f}" for v in r["loss"])),
        ("memory", memory),
        ("threads, torch", f"{r['threads']}, {r['torch']}"),
    ]
    return "\n".join(f"{key:<22} {value}" for key, value in rows)


def segnext_pair(ours: str = osp.join(REPO, "configs", SEGNEXT)) -> tuple[nn.Module, nn.Module]:
    """(ours, mmseg's) SegNeXt-T in training mode, mmseg's random weights in both."""
    init_default_scope("mmseg")
    models = []
    for path in (ours, config_file(f"mmseg::{SEGNEXT}")):
        cfg = Config.fromfile(path).model
        cfg.backbone.init_cfg = None
        models.append(MODELS.build(cfg).train())
    models[0].load_state_dict(models[1].state_dict(), strict=True)
    return models[0], models[1]


def compare_segnext(
    batch: int = 2, size: int = 512, runs: int = 5, seed: int = 0, device: str = "cpu"
) -> dict[str, Any]:
    """``rows``: fwd+bwd median s, peak bytes, ratios, spread, ours vs mmseg's alternating, of
    the ham (one-step NMF vs NMF2D's BPTT), the decode head and one iteration."""
    device = torch.device(device)
    torch.manual_seed(seed)
    ours, theirs = (m.to(device) for m in segnext_pair())
    images = torch.randn(batch, 3, size, size, device=device)
    labels = [torch.randint(0, 150, (1, size, size), device=device) for _ in range(batch)]
    meta = dict(img_shape=(size, size), pad_shape=(size, size))
    samples = [SegDataSample(gt_sem_seg=PixelData(data=y), metainfo=meta) for y in labels]
    with torch.no_grad():
        feats = [f.detach() for f in theirs.backbone(images)]
        up = [nn.functional.interpolate(f, feats[1].shape[2:], mode="bilinear") for f in feats[1:]]
        head = theirs.decode_head
        z = torch.relu(head.hamburger.ham_in(head.squeeze(torch.cat(up, 1))))

    def parts(m: nn.Module) -> dict[str, Callable[[], None]]:
        def iteration() -> None:
            m.zero_grad(set_to_none=True)
            sum(v for k, v in m.loss(images, samples).items() if "loss" in k).backward()

        return {
            "ham (NMF, r=16, 6 steps)": lambda: (
                m.decode_head.hamburger.ham(z.clone().requires_grad_(True)).sum().backward()
            ),
            "decode head": lambda: (
                m.decode_head([f.clone().requires_grad_(True) for f in feats]).sum().backward()
            ),
            "whole model, one iteration": iteration,
        }

    rows = []
    for (part, a), b in zip(parts(ours).items(), parts(theirs).values()):
        times = alternate({"ours": a, "mmseg": b}, device, runs)
        t, t_mmseg = (statistics.median(v) for v in times.values())
        mem = peak_memory(a, device)
        mem_mmseg = peak_memory(b, device)
        row = dict(part=part, time_ours=t, time_mmseg=t_mmseg, time_ratio=t / t_mmseg)
        row.update(spread=max(map(spread, times.values())), mem_ours=mem, mem_mmseg=mem_mmseg)
        rows.append(dict(row, mem_ratio=mem / mem_mmseg))
    return dict(rows=rows, batch=batch, size=size, runs=runs, device=str(device))


def segnext_markdown(result: dict[str, Any]) -> str:
    """A :func:`compare_segnext` result as a markdown table."""
    size = result["size"]
    cols = (
        "part",
        "ours fwd+bwd",
        "mmseg fwd+bwd",
        "time ratio",
        "spread",
        "ours peak",
        "mmseg peak",
        "memory ratio",
    )
    rows = [
        (
            r["part"],
            f"{r['time_ours'] * 1e3:.1f} ms",
            f"{r['time_mmseg'] * 1e3:.1f} ms",
            f"**{r['time_ratio']:.2f}x**",
            f"{r['spread'] * 100:.0f}%",
            f"{r['mem_ours'] / MIB:.0f} MiB",
            f"{r['mem_mmseg'] / MIB:.0f} MiB",
            f"**{r['mem_ratio']:.2f}x**",
        )
        for r in result["rows"]
    ]
    return "\n".join(
        [
            f"SegNeXt-T, training mode, {result['batch']}x3x{size}x{size} (head at 1/8: "
            f"{size // 8}x{size // 8} positions), {result.get('device', 'cpu')}, median of "
            f"{result['runs']} alternating runs",
            "",
            *table(cols, rows),
            "",
            "Spread: (max - min) / median of the runs, the larger of the two sides.",
        ]
    )
