"""The paper's Table 3 on your machine (Geng et al., ICLR 2021, Sec. 3.3) and cost against
n = H * W per module of :mod:`~tools.lab.benchmark.zoo` (docs/benchmark.md)."""

from __future__ import annotations

import contextlib
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Callable

import torch
from torch import Tensor, nn

from hamseg.models import Hamburger

from . import measure as M
from .zoo import NOT_AVAILABLE, PAPER_SHAPE, PAPER_TABLE3, SPECS, Spec

#: What the sweep measures and fits.
METRICS = ("infer_ms", "train_ms", "infer_mem_mb", "train_mem_mb")


@dataclass
class Settings:
    """Input ``shape`` (B, C, H, W), ``rank`` r, ``steps`` K, timing (``runs`` per module, taking
    turns, after ``warmup``); ``memory``: peak memory, ``count``: MACs and FLOPs."""

    shape: tuple[int, int, int, int]
    device: torch.device
    rank: int
    steps: int
    runs: int
    warmup: int
    memory: bool = True
    count: bool = True


def set_floors(row: dict[str, Any], rate: float) -> None:
    """The compute floors of a counted row at ``rate`` FLOP/s, and the times over them."""
    row["infer_floor_ms"] = 1e3 * 2 * row["macs"] / rate
    row["train_floor_ms"] = 1e3 * row["train_flops"] / rate
    row["infer_x_floor"] = row["infer_ms"] / row["infer_floor_ms"]
    row["train_x_floor"] = row["train_ms"] / row["train_floor_ms"]
    if "macs_run" in row:
        row["infer_run_floor_ms"] = 1e3 * 2 * row["macs_run"] / rate


def _count(row: dict, spec: Spec, st: Settings, module: nn.Module, x: Tensor, grad: Tensor) -> None:
    """MACs, fwd+bwd FLOPs; for hamseg's Hamburgers the hand counts and the MACs as run."""
    row["macs"], row["macs_by_op"] = M.count_macs(module, x)
    row["train_flops"] = M.count_train_flops(module, x, grad)
    if spec.ham is None:
        return
    args = (st.shape, spec.ham[0], st.rank, st.steps, spec.ham[1])
    row["macs_hand"] = M.hamburger_macs(*args, path="module")
    row["macs_paper"] = M.hamburger_macs(*args)["total"]
    row["macs_products"] = sum(row["macs_by_op"].get(op, 0) for op in M.PRODUCT_OPS)
    row["macs_hand_rel_diff"] = row["macs_products"] / row["macs_hand"]["total"] - 1.0
    row["macs_run"] = M.count_run_macs(module, x)
    fast = st.shape[2] * st.shape[3] >= Hamburger.fast_path_min_positions
    fast = fast and st.device.type in Hamburger.fast_path_devices
    row["macs_run_hand"] = M.hamburger_macs(*args, path="fast" if fast else "module")["total"]


def prepare_row(spec: Spec, st: Settings) -> tuple[dict[str, Any], dict[str, Callable]]:
    """A module's row (params; MACs and FLOPs if ``st.count``) and its two timed calls:
    'infer' (eval, ``no_grad``) and 'train' (train mode, ``out.backward(g)``, fixed g, gradients
    reset per call), each setting its module's mode first."""
    torch.manual_seed(0)
    module = spec.build(st.shape[1], st.rank, st.steps).to(st.device)
    x = torch.randn(st.shape, generator=torch.Generator().manual_seed(1)).to(st.device)
    row: dict[str, Any] = dict(key=spec.key, label=spec.label, config=spec.config)
    row["params"] = sum(p.numel() for p in module.parameters())
    module.eval()
    with torch.no_grad():
        grad = torch.randn(module(x).shape, generator=torch.Generator().manual_seed(2))
    grad = grad.to(st.device)
    if st.count:
        _count(row, spec, st, module, x, grad)
    xr = x.detach().clone().requires_grad_(True)

    def infer() -> None:
        module.eval()
        with torch.no_grad():
            module(x)

    def train() -> None:
        module.train()
        module.zero_grad(set_to_none=True)
        xr.grad = None
        module(xr).backward(grad)

    return row, dict(infer=infer, train=train)


def _time_interleaved(rows: list[dict], calls: list[dict[str, Callable]], st: Settings) -> None:
    """Time every row's calls, the rows taking turns run by run (:func:`.measure.alternate`), so
    that a change in the machine's load reaches every row alike; then peak memory."""
    for name in ("infer", "train"):
        for call in calls:
            for _ in range(st.warmup - 1):  # alternate() warms each up once
                call[name]()
        times = M.alternate({i: c[name] for i, c in enumerate(calls)}, st.device, st.runs)
        for i, row in enumerate(rows):
            t = times[i]
            row[f"{name}_ms"] = 1e3 * statistics.median(t)
            row[f"{name}_runs"] = len(t)
            row[f"{name}_ms_all"] = [1e3 * v for v in t]
            row[f"{name}_spread"] = M.spread(t)
    for row, call in zip(rows, calls) if st.memory else ():
        for name in ("infer", "train"):
            row[f"{name}_mem_mb"] = M.peak_memory(call[name], st.device) / M.MIB


def measure_row(spec: Spec, st: Settings, rate: float | None = None) -> dict[str, Any]:
    """Params, MACs, times (median, all, spread), floors at ``rate`` and peak memory of one
    module (:func:`prepare_row`)."""
    row, calls = prepare_row(spec, st)
    _time_interleaved([row], [calls], st)
    if st.count and rate:
        set_floors(row, rate)
    return row


def _environment(st: Settings, **extra: Any) -> dict[str, Any]:
    env = dict(M.machine(), device=str(st.device), rank=st.rank, steps=st.steps, runs=st.runs)
    return dict(env, warmup=st.warmup, **extra)


def run_table(st: Settings, keys: Sequence[str] | None = None, rate_size: int = 2048) -> dict:
    """``env``, ``rows``, ``targets``, ... of the modules ``keys`` (default: the default rows),
    timed interleaved (:func:`_time_interleaved`); floors at the higher fp32 matmul rate
    (``rate_size``^3) of two, at start and at end."""
    env = _environment(st, shape=list(st.shape), rate_size=rate_size)
    env["rate_start"] = M.matmul_rate(st.device, rate_size)
    rows = []
    calls = []
    for key in keys or [k for k, spec in SPECS.items() if spec.default]:
        print(f"[benchmark] {key}: built and counted", flush=True)
        row, call = prepare_row(SPECS[key], st)
        rows.append(row)
        calls.append(call)
    print(f"[benchmark] timing {len(rows)} modules in turn, {st.runs} runs each", flush=True)
    _time_interleaved(rows, calls, st)
    env["rate_end"] = M.matmul_rate(st.device, rate_size)
    env["rate"] = max(env["rate_start"], env["rate_end"])
    for r in rows:
        if st.count:
            set_floors(r, env["rate"])
        print(
            f"[benchmark]   {r['label']}: params {r['params'] / M.MIB:.2f}M  "
            f"MACs {r.get('macs', 0) / 1e9:.2f}G  infer {r['infer_ms']:.1f} ms  "
            f"fwd+bwd {r['train_ms']:.1f} ms",
            flush=True,
        )
    targets = evaluate_targets({r["key"]: r for r in rows}, tuple(st.shape))
    return dict(
        env=env,
        rows=rows,
        targets=targets,
        paper_table3=PAPER_TABLE3,
        not_available=NOT_AVAILABLE,
    )


def evaluate_targets(rows: dict[str, dict], shape: tuple[int, ...]) -> list[dict[str, Any]]:
    """The [speed] issue's targets on the rows present (and Table 3's params and MACs)."""
    out: list[dict[str, Any]] = []

    def add(target: str, value: float, limit: str, passed: bool, detail: str) -> None:
        out.append(dict(target=target, value=value, limit=limit, passed=passed, detail=detail))

    nmf = rows.get("ham_nmf")
    peer = rows.get("mmseg_ham")
    sa = rows.get("sa")
    if nmf and "infer_x_floor" in nmf:
        v = nmf["infer_x_floor"]
        detail = f"{nmf['infer_ms']:.1f} ms vs floor {nmf['infer_floor_ms']:.1f} ms"
        if "infer_run_floor_ms" in nmf:
            run_ms = nmf["infer_run_floor_ms"]
            macs_run = nmf["macs_run"] / 1e9
            detail += f" (the floor of the products it runs, {macs_run:.2f}G MACs: "
            detail += f"{run_ms:.1f} ms, x{nmf['infer_ms'] / run_ms:.2f})"
        add("Ham (NMF) inference <= 1.2x compute floor", v, "<= 1.2", v <= 1.2, detail)
    if nmf and peer:
        v = nmf["train_ms"] / peer["train_ms"]
        detail = f"{nmf['train_ms']:.1f} ms vs {peer['train_ms']:.1f} ms"
        add("Ham (NMF) fwd+bwd <= 0.5x mmseg Hamburger fwd+bwd", v, "<= 0.5", v <= 0.5, detail)
        if "train_mem_mb" in nmf and "train_mem_mb" in peer:
            v = nmf["train_mem_mb"] / peer["train_mem_mb"]
            detail = f"{nmf['train_mem_mb']:.0f} MiB vs {peer['train_mem_mb']:.0f} MiB"
            add("Ham (NMF) fwd+bwd peak memory below mmseg Hamburger's", v, "< 1", v < 1, detail)
    if nmf and sa:
        v = sa["train_ms"] / nmf["train_ms"]
        detail = f"{sa['train_ms']:.0f} ms / {nmf['train_ms']:.1f} ms"
        add("Ham (NMF) fwd+bwd >= 10x faster than SA", v, ">= 10", v >= 10, detail)
    for key, paper in (("ham_nmf", "Ham (NMF)"), ("ham_cd", "Ham (CD)")):
        if not (row := rows.get(key)) or tuple(shape) != PAPER_SHAPE:
            continue
        params, macs = PAPER_TABLE3[paper][:2]
        v = row["params"] / M.MIB
        detail = f"{row['params']:,} parameters"
        add(f"{paper} params {params:.2f}M", v, f"{params:.2f}", round(v, 2) == params, detail)
        if "macs" in row:
            v = row["macs"] / 1e9 / macs - 1
            detail = f"{row['macs'] / 1e9:.2f} G counted"
            add(f"{paper} MACs within 5% of {macs}G", v, "|.| <= 0.05", abs(v) <= 0.05, detail)
    return out


def _spread(row: dict[str, Any]) -> str:
    return f"{100 * row['infer_spread']:.0f}% / {100 * row['train_spread']:.0f}%"


def _header(env: dict[str, Any], what: str) -> str:
    name = env.get("gpu") if env["device"].startswith("cuda") else env["cpu"]
    return (
        f"{what}, {env['device']}, {env['threads']} threads, r={env['rank']}, K={env['steps']}; "
        f"median of {env['runs']} runs after {env['warmup']} warm-up, the modules taking turns "
        "run by run; spread: (max - min) / median of the runs, inference / forward+backward. "
        f"{name}; torch {env['torch']}."
    )


_COLUMNS = (
    "Module",
    "Params (M)",
    "MACs (G)",
    "Infer ms",
    "floor ms",
    "x floor",
    "Fwd+bwd ms",
    "floor ms",
    "x floor",
    "Infer mem (MiB)",
    "Fwd+bwd mem (MiB)",
    "spread",
)


def markdown(result: dict[str, Any]) -> str:
    """The table report: settings, table, MAC cross-checks, modules, targets."""
    env = result["env"]
    rows = result["rows"]
    f = M.fmt
    lines = [
        _header(env, f"Input {'x'.join(map(str, env['shape']))}"),
        "",
        f"fp32 matmul rate ({env['rate_size']}^3): {env['rate_start'] / 1e9:.0f} GFLOP/s at "
        f"start, {env['rate_end'] / 1e9:.0f} GFLOP/s at end; floors use the higher, "
        f"{env['rate'] / 1e9:.0f} GFLOP/s.",
        "",
    ]
    lines += M.table(
        _COLUMNS,
        [
            (
                r["label"],
                f"{r['params'] / M.MIB:.2f}",
                f(r.get("macs", 0) / 1e9, ".2f"),
                f"{r['infer_ms']:.1f}",
                f(r.get("infer_floor_ms")),
                f(r.get("infer_x_floor"), ".2f"),
                f"{r['train_ms']:.1f}",
                f(r.get("train_floor_ms")),
                f(r.get("train_x_floor"), ".2f"),
                f(r.get("infer_mem_mb"), ".0f"),
                f(r.get("train_mem_mb"), ".0f"),
                _spread(r),
            )
            for r in rows
        ],
        "l" + "r" * 11,
    )
    if hand := [r for r in rows if "macs_hand" in r]:
        lines += [
            "",
            "MACs cross-check (Hamburger rows): the library's count of the matrix products of "
            "the module calls, the hand count (path='module') and that of the algorithms as "
            "written (path='paper'; docs/benchmark.md):",
        ]
        lines += [
            f"- {r['label']}: counted {r['macs_products']:,} vs hand "
            f"{r['macs_hand']['total']:,} ({100 * r['macs_hand_rel_diff']:+.3f}%); paper "
            f"{r['macs_paper']:,}; by op: "
            + ", ".join(f"{k} {v:,}" for k, v in sorted(r["macs_by_op"].items()))
            for r in hand
        ]
        lines += [
            "",
            "MACs run (Hamburger rows): the timed inference call, counted as it runs (its bread "
            "after the ham multiplies the factors, (W D) C), against the hand count of that "
            "path (path='fast'); the table's MACs and floors are the module calls' count:",
        ]
        lines += [
            f"- {r['label']}: run {r['macs_run']:,} vs hand {r['macs_run_hand']:,}; floor "
            f"{r['infer_run_floor_ms']:.1f} ms, inference "
            f"x{r['infer_ms'] / r['infer_run_floor_ms']:.2f} of it"
            for r in hand
        ]
    lines += ["", "Modules:"]
    lines += [
        f"- {r['label']} (`{r['key']}`): {r['config']}; {r['infer_runs']}/{r['train_runs']} runs."
        for r in rows
    ]
    lines += [f"- {k}: not measured, {why}." for k, why in result.get("not_available", {}).items()]
    if result["targets"]:
        lines += [
            "",
            *M.table(
                ("Target", "Value", "Limit", "Met", "Detail"),
                [
                    (
                        t["target"],
                        f"{t['value']:.3f}",
                        t["limit"],
                        "yes" if t["passed"] else "**no**",
                        t["detail"],
                    )
                    for t in result["targets"]
                ],
                "lrlll",
            ),
        ]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: str) -> None:
    """Bar charts of the times (with the compute floors) and of peak memory per module."""
    rows = result["rows"]
    pos = list(range(len(result["rows"])))
    fig, axes = M.pyplot().subplots(1, 3, figsize=(18, 6))
    for ax, key, title in zip(axes, ("infer", "train"), ("Inference", "Forward+backward")):
        ax.bar(pos, [r[f"{key}_ms"] for r in rows], color="tab:blue", label="measured")
        if all(f"{key}_floor_ms" in r for r in rows):
            floors = [r[f"{key}_floor_ms"] for r in rows]
            ax.scatter(pos, floors, color="black", marker="_", s=300, label="compute floor")
        ax.set_title(f"{title} time (ms)")
    for shift, key, label in ((-0.2, "infer", "inference"), (0.2, "train", "forward+backward")):
        if rows and f"{key}_mem_mb" in rows[0]:
            mem = [r[f"{key}_mem_mb"] for r in rows]
            axes[2].bar([p + shift for p in pos], mem, 0.4, label=label)
    axes[2].set_title("Peak memory (MiB)")
    for ax in axes:
        ax.set_yscale("log")
        ax.set_xticks(pos, [r["label"] for r in rows], rotation=60, ha="right", fontsize=8)
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend()
    env = result["env"]
    shape = "x".join(map(str, env["shape"]))
    fig.suptitle(f"Context modules on {shape}, {env['device']}, {env['threads']} threads")
    M.save_figure(fig, path)


def loglog_slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of log(y) against log(x) of (x, y) points (0 if all x are equal)."""
    xs = [math.log(x) for x, _ in points]
    ys = [math.log(y) for _, y in points]
    with contextlib.suppress(statistics.StatisticsError):
        return statistics.linear_regression(xs, ys).slope
    return 0.0


def run_sweep(
    st: Settings,
    sizes: Sequence[int],
    keys: Sequence[str] | None = None,
    max_pairwise_gb: float = 8.0,
) -> dict[str, Any]:
    """``env``, ``points``, log-log ``slopes`` of time and memory of ``keys`` (default: ham_nmf,
    sa) on B x C x S x S per S in ``sizes``; quadratic modules skip S past ``max_pairwise_gb``."""
    keys = list(keys or ["ham_nmf", "sa"])
    b, c = st.shape[:2]
    points: list[dict[str, Any]] = []
    for key in keys:
        for size in sizes:
            point: dict[str, Any] = dict(key=key, label=SPECS[key].label, size=size, n=size**2)
            if SPECS[key].quadratic and (gb := 3 * b * size**4 * 4 / 1e9) > max_pairwise_gb:
                point["skipped"] = (
                    f"n^2 maps need ~{gb:.1f} GB > --max-pairwise-gb {max_pairwise_gb}"
                )
                print(f"[sweep] {key} H=W={size}: skipped ({point['skipped']})", flush=True)
            else:
                print(f"[sweep] {key} H=W={size} ...", flush=True)
                row = measure_row(SPECS[key], replace(st, shape=(b, c, size, size), count=False))
                point.update({k: v for k, v in row.items() if k.startswith(("infer_", "train_"))})
            points.append(point)
    slopes: dict[str, dict[str, float]] = {key: {} for key in keys}
    for key in keys:
        for m in METRICS:
            if len(pts := [(p["n"], p[m]) for p in points if p["key"] == key and p.get(m)]) > 1:
                slopes[key][m] = loglog_slope(pts)
    env = _environment(st, shape=[b, c], sizes=list(sizes))
    return dict(env=env, points=points, slopes=slopes)


def sweep_markdown(result: dict[str, Any]) -> str:
    """The sweep as markdown: one row per point, then the slopes."""
    env = result["env"]
    f = M.fmt
    lines = [
        _header(env, f"Sweep: B={env['shape'][0]}, C={env['shape'][1]}, H=W in {env['sizes']}")
    ]
    cols = (
        "Module",
        "H=W",
        "n",
        "Infer ms",
        "Fwd+bwd ms",
        "Infer mem (MiB)",
        "Fwd+bwd mem (MiB)",
        "spread",
    )
    lines += [
        "",
        *M.table(
            cols,
            [
                f"| {p['label']} | {p['size']} | {p['n']} | skipped: {p['skipped']} |||||"
                if "skipped" in p
                else (
                    p["label"],
                    p["size"],
                    p["n"],
                    f"{p['infer_ms']:.1f}",
                    f"{p['train_ms']:.1f}",
                    f(p.get("infer_mem_mb"), ".0f"),
                    f(p.get("train_mem_mb"), ".0f"),
                    _spread(p),
                )
                for p in result["points"]
            ],
            "l" + "r" * 7,
        ),
    ]
    lines += ["", "Log-log slopes (exponent of n):", ""]
    for key, fits in result["slopes"].items():
        lines.append(f"- {SPECS[key].label}: " + ", ".join(f"{m} {s:.2f}" for m, s in fits.items()))
    return "\n".join(lines) + "\n"


def sweep_plot(result: dict[str, Any], path: str) -> None:
    """Log-log plots of time and peak memory against n, one colour per module."""
    fig, axes = M.pyplot().subplots(1, 2, figsize=(13, 5.5))
    for i, key in enumerate(result["slopes"]):
        pts = [p for p in result["points"] if p["key"] == key and "skipped" not in p]
        for ax, unit in zip(axes, ("ms", "mem_mb")):
            for style, part, name in (("o-", "infer", "inference"), ("s--", "train", "fwd+bwd")):
                if pts and f"{part}_{unit}" in pts[0]:
                    ys = [p[f"{part}_{unit}"] for p in pts]
                    label = f"{SPECS[key].label} {name}"
                    ax.plot([p["n"] for p in pts], ys, style, color=f"C{i}", label=label)
    for ax, title in zip(axes, ("Time (ms)", "Peak memory (MiB)")):
        ax.set(xscale="log", yscale="log", xlabel="n = H x W", title=title)
        ax.grid(which="both", alpha=0.3)
        ax.legend(fontsize=8)
    env = result["env"]
    b, c, dev, threads = *env["shape"], env["device"], env["threads"]
    fig.suptitle(f"Cost against n, B={b}, C={c}, {dev}, {threads} threads")
    M.save_figure(fig, path)
