"""The table report: markdown (table, environment, MAC cross-checks, targets) and bar charts."""

from __future__ import annotations

import math
from typing import Any

from .memory import MIB
from .outputs import pyplot, save_figure


def fmt(v: Any, spec: str = ".1f") -> str:
    """``v`` formatted with ``spec``; '-' for a missing (None or NaN) value."""
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
        macs = fmt(row.get("macs", 0) / 1e9, ".2f")
        lines.append(
            f"| {row['label']} | {row['params'] / MIB:.2f} | {macs}"
            f" | {row['infer_ms']:.1f} | {fmt(row.get('infer_floor_ms'))} | "
            f"{fmt(row.get('infer_x_floor'), '.2f')} | {row['train_ms']:.1f} | "
            f"{fmt(row.get('train_floor_ms'))} | {fmt(row.get('train_x_floor'), '.2f')} | "
            f"{fmt(row.get('infer_mem_mb'), '.0f')} | {fmt(row.get('train_mem_mb'), '.0f')} | "
            f"{fmt(row.get('infer_other_cpu'), '.2f')} / {fmt(row.get('train_other_cpu'), '.2f')}"
            f" | {fmt(row.get('infer_speed'), '.2f')} / {fmt(row.get('train_speed'), '.2f')}"
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
    plt = pyplot()
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
    save_figure(fig, path)
