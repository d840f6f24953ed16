"""SegNeXt-T's Hamburger head, hamseg's HamLightHead against mmseg's LightHamHead, training mode.

At the recipe's crop (a 2 x 3 x 512 x 512 batch; MSCAN-T's level 1, the head's resolution, is
64 x 64 = 4096 positions, 256 channels): forward + backward time and peak memory of the ham
alone (hamseg's one-step NMF vs mmseg's NMF2D, which back-propagates through its 6 steps), of
the whole decode head, and one whole-model training iteration (loss + backward). Both models
carry the same weights; the timings alternate ours / mmseg's run by run, so both see the same
machine, and a matmul probe before and after says how steady the machine was.
"""

from __future__ import annotations

import os.path as osp
import statistics
from collections.abc import Callable
from typing import Any

import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample
from torch import Tensor, nn

from .memory import MIB, peak_memory
from .timing import probe_rate, time_fn

__all__ = ["build_pair", "compare", "markdown"]

NAME = "segnext_mscan-t_1xb16-adamw-160k_ade20k-512x512.py"
OURS = osp.join(
    osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))), "configs", "segnext", NAME
)


def build_pair(ours_cfg: str = OURS) -> tuple[nn.Module, nn.Module]:
    """(ours, mmseg's) SegNeXt-T segmentors in training mode with mmseg's random weights in
    both (no pretrained download); mmseg's from its own config of the same name."""
    import mmseg

    init_default_scope("mmseg")
    mmseg_cfg = osp.join(osp.dirname(mmseg.__file__), ".mim", "configs", "segnext", NAME)
    models = []
    for path in (ours_cfg, mmseg_cfg):
        cfg = Config.fromfile(path).model
        cfg.backbone.init_cfg = None
        models.append(MODELS.build(cfg).train())
    models[0].load_state_dict(models[1].state_dict(), strict=True)
    return models[0], models[1]


def _fwd_bwd(module: Callable[[Any], Tensor], make_input: Callable[[], Any]) -> Callable[[], None]:
    def run() -> None:
        out = module(make_input())
        out.float().sum().backward()

    return run


def _iteration(model: nn.Module, images: Tensor, samples: list) -> Callable[[], None]:
    def run() -> None:
        model.zero_grad(set_to_none=True)
        losses = model.loss(images, samples)
        sum(v for k, v in losses.items() if "loss" in k).backward()

    return run


def compare(
    batch: int = 2, size: int = 512, runs: int = 5, seed: int = 0, device: str = "cpu"
) -> dict[str, Any]:
    """Measure the three pairs (see the module docstring) on ``device`` (CUDA: CUDA events and
    the allocator's peak, as hamseg.benchmark times and measures everywhere).

    Returns:
        ``rows``: per part, ours and mmseg's median time (s) and peak memory (bytes), their
        ratios; ``probe``: the machine's matmul rate (FLOP/s) before and after.
    """
    device = torch.device(device)
    torch.manual_seed(seed)
    ours, theirs = (m.to(device) for m in build_pair())
    images = torch.randn(batch, 3, size, size, device=device)
    samples = [
        SegDataSample(
            gt_sem_seg=PixelData(data=torch.randint(0, 150, (1, size, size), device=device)),
            metainfo=dict(img_shape=(size, size), pad_shape=(size, size)),
        )
        for _ in range(batch)
    ]
    with torch.no_grad():
        feats = [f.detach() for f in theirs.backbone(images)]
        head = theirs.decode_head
        levels = [
            nn.functional.interpolate(f, feats[1].shape[2:], mode="bilinear") for f in feats[1:]
        ]
        z = torch.relu(head.hamburger.ham_in(head.squeeze(torch.cat(levels, 1))))

    def leaf(t: Tensor) -> Callable[[], Tensor]:
        return lambda: t.clone().requires_grad_(True)

    pairs = {
        "ham (NMF, r=16, 6 steps)": (
            _fwd_bwd(ours.decode_head.hamburger.ham, leaf(z)),
            _fwd_bwd(theirs.decode_head.hamburger.ham, leaf(z)),
        ),
        "decode head": (
            _fwd_bwd(ours.decode_head, lambda: [f.clone().requires_grad_(True) for f in feats]),
            _fwd_bwd(theirs.decode_head, lambda: [f.clone().requires_grad_(True) for f in feats]),
        ),
        "whole model, one iteration": (
            _iteration(ours, images, samples),
            _iteration(theirs, images, samples),
        ),
    }
    probe = [probe_rate(device)]
    rows = []
    for name, (a, b) in pairs.items():
        times: dict[str, list[float]] = {"ours": [], "mmseg": []}
        for fn in (a, b):
            fn()  # warm-up
        for i in range(runs):  # alternate, first one then the other: both see the same machine
            for side in ("ours", "mmseg") if i % 2 == 0 else ("mmseg", "ours"):
                fn = a if side == "ours" else b
                times[side] += time_fn(fn, device, 1, 0, budget=1e9)
        mem = {"ours": peak_memory(a, device), "mmseg": peak_memory(b, device)}
        t = {k: statistics.median(v) for k, v in times.items()}
        spread = {k: (max(v) - min(v)) / statistics.median(v) for k, v in times.items()}
        rows.append(
            dict(
                part=name,
                time_ours=t["ours"],
                time_mmseg=t["mmseg"],
                time_ratio=t["ours"] / t["mmseg"],
                spread=max(spread.values()),
                mem_ours=mem["ours"],
                mem_mmseg=mem["mmseg"],
                mem_ratio=mem["ours"] / mem["mmseg"],
            )
        )
    probe.append(probe_rate(device))
    return dict(rows=rows, probe=probe, batch=batch, size=size, runs=runs, device=str(device))


def markdown(result: dict[str, Any]) -> str:
    """The comparison as a markdown table with the machine's steadiness under it."""
    lines = [
        f"SegNeXt-T, training mode, {result['batch']}x3x{result['size']}x{result['size']} "
        f"(head at 1/8: {result['size'] // 8}x{result['size'] // 8} positions), "
        f"{result.get('device', 'cpu')}, median of "
        f"{result['runs']} alternating runs",
        "",
        "| part | ours fwd+bwd | mmseg fwd+bwd | time ratio | spread | ours peak | mmseg peak "
        "| memory ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['part']} | {r['time_ours'] * 1e3:.1f} ms | {r['time_mmseg'] * 1e3:.1f} ms "
            f"| **{r['time_ratio']:.2f}x** | {r['spread'] * 100:.0f}% "
            f"| {r['mem_ours'] / MIB:.0f} MiB | {r['mem_mmseg'] / MIB:.0f} MiB "
            f"| **{r['mem_ratio']:.2f}x** |"
        )
    before, after = (p / 1e9 for p in result["probe"])
    lines += [
        "",
        f"Spread: (max - min) / median of the runs, the larger of the two sides. Machine speed "
        f"(1024^3 matmul) {before:.0f} GFLOP/s before and {after:.0f} after.",
    ]
    return "\n".join(lines)
