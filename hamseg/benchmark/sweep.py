"""Sweep mode: time and peak memory against n = H * W, and their log-log slopes.

Every selected module of the zoo (default: hamseg's NMF Hamburger and self-attention) is measured
on B x C x size x size inputs for each size (counts off); the modules whose memory grows with n^2
(:attr:`~hamseg.benchmark.zoo.Spec.quadratic`) skip the sizes whose three n x n maps would need
more than ``max_pairwise_gb``. The slope of log(metric) against log(n) is the exponent of n.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from typing import Any, Callable, Optional

from .machine import load
from .measure import Settings, measure
from .outputs import progress, pyplot, save_figure
from .report import fmt
from .table import environment
from .zoo import SPECS

#: What the sweep measures and fits.
METRICS = ("infer_ms", "train_ms", "infer_mem_mb", "train_mem_mb")


def loglog_slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of log(y) against log(x) of (x, y) points (0 if all x are equal)."""
    xs = [math.log(x) for x, _ in points]
    ys = [math.log(y) for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0


def run_sweep(
    st: Settings,
    sizes: Sequence[int],
    keys: Optional[Sequence[str]] = None,
    max_pairwise_gb: float = 8.0,
    rate_size: int = 2048,
    log: Callable[[str], None] = progress,
) -> dict[str, Any]:
    """Time and memory of the modules ``keys`` on H = W = each of ``sizes``.

    Args:
        st: How to measure; of its shape only B and C are used.
        sizes: H = W of the inputs.
        keys: Rows of :data:`~hamseg.benchmark.zoo.SPECS` (default: ham_nmf and sa).
        max_pairwise_gb: Quadratic modules skip sizes whose n^2 maps need more (GB).
        rate_size: Recorded in the environment (the sweep sets no floors).
        log: Called with a progress line per point.

    Returns:
        ``env``, ``points`` (one per module and size, ``skipped`` with the reason where it was)
        and ``slopes`` (per module, the log-log slope of each metric with two points or more).
    """
    keys = list(keys or ["ham_nmf", "sa"])
    b, c = st.shape[:2]
    env = environment(st, rate_size)
    env.update(shape=[b, c], sizes=list(sizes), load_start=load())
    points: list[dict[str, Any]] = []
    probe_best = st.probe_best
    for key in keys:
        spec = SPECS[key]
        for size in sizes:
            n = size * size
            entry: dict[str, Any] = dict(key=key, label=spec.label, size=size, n=n)
            pairwise_gb = 3 * b * n * n * 4 / 1e9
            if spec.quadratic and pairwise_gb > max_pairwise_gb:
                entry["skipped"] = (
                    f"n^2 maps need ~{pairwise_gb:.1f} GB > --max-pairwise-gb {max_pairwise_gb}"
                )
                log(f"[sweep] {key} H=W={size}: skipped ({entry['skipped']})")
                points.append(entry)
                continue
            log(f"[sweep] {key} H=W={size} (load {load()}) ...")
            point = dataclasses.replace(
                st, shape=(b, c, size, size), count=False, probe_best=probe_best
            )
            row = measure(spec, point, rate=1.0)
            probe_best = point.probe_best
            keep = ("_ms", "_mb", "_runs", "_other_cpu", "_speed")
            entry.update({k: row[k] for k in row if k.endswith(keep)})
            entry["load_before"] = row["load_before"]
            points.append(entry)
    env["load_end"] = load()
    slopes: dict[str, dict[str, float]] = {}
    for key in keys:
        slopes[key] = {}
        for metric in METRICS:
            pts = [(p["n"], p[metric]) for p in points if p["key"] == key and p.get(metric)]
            if len(pts) >= 2:
                slopes[key][metric] = loglog_slope(pts)
    return dict(env=env, points=points, slopes=slopes)


def sweep_markdown(result: dict[str, Any]) -> str:
    """The sweep as markdown: one table row per point, then the slopes."""
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
            f"{p['train_ms']:.1f} | {fmt(p.get('infer_mem_mb'), '.0f')} | "
            f"{fmt(p.get('train_mem_mb'), '.0f')} | "
            f"{fmt(p.get('infer_other_cpu'), '.2f')} / {fmt(p.get('train_other_cpu'), '.2f')} | "
            f"{fmt(p.get('infer_speed'), '.2f')} / {fmt(p.get('train_speed'), '.2f')} | "
            f"{p['load_before']} |"
        )
    lines += ["", "Log-log slopes (exponent of n):", ""]
    for key, fits in result["slopes"].items():
        desc = ", ".join(f"{m} {s:.2f}" for m, s in fits.items())
        lines.append(f"- {SPECS[key].label}: {desc}")
    return "\n".join(lines) + "\n"


def sweep_plot(result: dict[str, Any], path: str) -> None:
    """Log-log plots of time and peak memory against n, one colour per module."""
    plt = pyplot()
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
    save_figure(fig, path)
