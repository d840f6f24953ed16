"""The table and charts of a head comparison (:mod:`~tools.lab.analysis.head_comparison`): per head
the median and range over seeds, a distribution-free interval, how many seeds reached the
threshold and how fast, the rank test against the best head, the other protocol's median,
parameters and the interleaved time per iteration; the per-seed dots and learning curves."""

from __future__ import annotations

import os
import os.path as osp
import statistics
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from .head_stats import best_by_median, rank_test, smallest_p, summarize


def final_value(run: dict[str, Any], protocol: str) -> float:
    """A run's val mIoU under ``protocol``: the mean over the paper protocol's evaluations, the
    ensemble's value, or the one value of a head without a ham (mmseg's LightHamHead: the
    paper's, whatever the protocol)."""
    ev = run["eval"]
    if "deterministic" in ev:
        return float(ev["deterministic"])
    if protocol == "ensemble" and "ensemble" in ev:
        return float(ev["ensemble"])
    return float(statistics.fmean(ev["paper"]))


#: Table columns.
COLUMNS = (
    "Head",
    "val mIoU, median [min, max]",
    "95% interval of the median",
    "seeds >= {t}",
    "iters to {t} (median)",
    "rank test vs best: p (shift)",
    "{other} (median)",
    "head params",
    "s / iter (x {ref})",
)


def summary_rows(
    runs: Sequence[dict[str, Any]],
    keys: Sequence[str],
    protocol: str,
    threshold: float,
    timings: Optional[dict[str, list[float]]] = None,
    reference: str = "fcn",
) -> list[dict[str, Any]]:
    """One row per head key in ``keys`` that has runs: its values under ``protocol`` by seed,
    :func:`~tools.lab.analysis.head_stats.summarize`, the other protocol's median (hams), the rank
    test against the head with the best median (None for that head, or with one seed),
    parameters and, with ``timings`` (:func:`~tools.lab.analysis.head_comparison.time_heads`),
    the median s/iter and the median of its per-round ratios to ``reference``."""
    other = "ensemble" if protocol == "paper" else "paper"
    rows = []
    for key in keys:
        mine = sorted((r for r in runs if r["key"] == key), key=lambda r: r["seed"])
        if not mine:
            continue
        values = [final_value(r, protocol) for r in mine]
        row = dict(key=key, name=mine[0]["name"], kind=mine[0]["kind"], values=values)
        row.update(seeds=[r["seed"] for r in mine], max_iters=mine[0]["result"]["max_iters"])
        row["summary"] = summarize(values, threshold, [r["curve"] for r in mine if r["curve"]])
        row["other"] = None
        if mine[0]["kind"] == "ham":
            row["other"] = statistics.median(final_value(r, other) for r in mine)
        row["params"] = mine[0]["result"]["params"]
        row["head_params"] = mine[0]["result"]["head_params"]
        if timings and key in timings:
            row["s_per_iter"] = statistics.median(timings[key])
            if reference in timings:
                ratios = [a / b for a, b in zip(timings[key], timings[reference])]
                row["x_reference"] = statistics.median(ratios)
        rows.append(row)
    best = best_by_median({r["key"]: r["values"] for r in rows}) if rows else None
    for row in rows:  # with one seed per head there is no best: no test can tell
        row["best"] = row["key"] == best and len(row["values"]) > 1
        values = next(r["values"] for r in rows if r["key"] == best)
        enough = len(row["values"]) > 1 and len(values) > 1
        row["test"] = rank_test(row["values"], values) if enough and not row["best"] else None
    return rows


def _cells(row: dict[str, Any], threshold: float) -> list[str]:
    s = row["summary"]
    value = f"**{s.median:.1f}**" + (f" [{s.low:.1f}, {s.high:.1f}]" if s.n > 1 else " (1 seed)")
    interval = "-"
    if s.interval is not None:
        iv = s.interval
        interval = f"[{iv.low:.1f}, {iv.high:.1f}]" + (
            "" if iv.coverage >= 0.95 else f" ({100 * iv.coverage:.0f}% only)"
        )
    iters = (
        "-"
        if s.iters_to_threshold is None
        else (
            "not reached" if s.iters_to_threshold == float("inf") else f"{s.iters_to_threshold:.0f}"
        )
    )
    test = "best" if row["best"] else "-"
    if row["test"] is not None:
        t = row["test"]
        test = f"p = {t.p:.2g}{'' if t.exact else ' (normal approx.)'} ({t.shift:+.1f})"
    other = "-" if row["other"] is None else f"{row['other']:.1f}"
    speed = "-"
    if "s_per_iter" in row:
        speed = f"{row['s_per_iter']:.2f}"
        speed += f" ({row['x_reference']:.2f}x)" if "x_reference" in row else ""
    params = f"{row['head_params'] / 1e6:.2f}M"
    return [row["name"], value, interval, f"{s.reached}/{s.n}", iters, test, other, params, speed]


def markdown_table(
    rows: Sequence[dict[str, Any]], protocol: str, threshold: float, reference: str = "FCN"
) -> list[str]:
    """The table's lines (:data:`COLUMNS`)."""
    other = "ensemble" if protocol == "paper" else "paper protocol"
    t = f"{threshold:g}"
    header = [c.format(t=t, other=other, ref=reference) for c in COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    return lines + ["| " + " | ".join(_cells(r, threshold)) + " |" for r in rows]


def per_seed_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per head: its value for each seed."""
    return [
        f"- {r['name']}: "
        + ", ".join(f"{v:.1f}" for v in r["values"])
        + f" (seeds {', '.join(map(str, r['seeds']))})"
        for r in rows
    ]


def notes(rows: Sequence[dict[str, Any]], protocol: str, eval_runs: int) -> str:
    """How to read the table: the protocol, the interval, the test and what n allows."""
    ns = sorted({r["summary"].n for r in rows})
    if ns == [1]:
        return (
            "One seed per head: the values are single runs, with no interval and no test; "
            "differences between heads can be chance (run `--seeds 0 1 2 3 4 5 6 7 8 9`)."
        )
    n = min(ns)
    how = (
        f"the paper's: one fresh random dictionary per forward, each ham run's value the mean of "
        f"{eval_runs} evaluations; the other column is hamseg's ensemble (mean of 12 seeded draws)"
        if protocol == "paper"
        else "hamseg's ensemble (the mean of 12 seeded draws); the other column is the paper's "
        f"protocol (fresh random dictionaries, the mean of {eval_runs} evaluations)"
    )
    return (
        f"Protocol for every head: {how}; heads without a ham are deterministic. The interval is "
        "distribution-free (order statistics; its coverage is exact, 95% needs n >= 6). The rank "
        "test is a two-sided Mann-Whitney U test of each head's seeds against the best head's "
        "(highest median), exact where no values tie; the shift in brackets is the "
        f"Hodges-Lehmann estimate. With n = {n} seeds per head the smallest p the exact test can "
        f"give is {smallest_p(n, n):.2g}."
    )


def dots_chart(rows: Sequence[dict[str, Any]], path: str, title: str, threshold: float) -> None:
    """Every seed's value as a dot, the median as a bar, the threshold as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"local": "0.5", "global pooling": "0.3", "ham": "tab:red"}
    fig, ax = plt.subplots(figsize=(max(6.4, 0.75 * len(rows) + 2), 4.2), dpi=120)
    rng = np.random.default_rng(0)
    for i, r in enumerate(rows):
        colour = colours.get(r["kind"], "tab:purple")
        ax.bar(i, r["summary"].median, color=colour, alpha=0.35, width=0.7)
        jitter = rng.uniform(-0.18, 0.18, len(r["values"]))
        ax.scatter(i + jitter, r["values"], color=colour, s=14, zorder=3, edgecolors="k", lw=0.3)
    ax.axhline(threshold, color="k", lw=0.6, ls="--")
    ax.set_xticks(range(len(rows)), [r["name"] for r in rows], rotation=35, ha="right", fontsize=8)
    ax.set(ylabel="val mIoU (%)", ylim=(0, 101))
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def curves_chart(
    runs: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]], path: str, title: str
) -> None:
    """Learning curves: per head the median over seeds of val mIoU against iteration, and the
    range over seeds as a band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.2, 4.2), dpi=120)
    for i, r in enumerate(rows):
        curves = [dict(run["curve"]) for run in runs if run["key"] == r["key"] and run["curve"]]
        steps = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
        if not steps:
            continue
        values = np.array([[c[s] for s in steps] for c in curves])
        ax.plot(steps, np.median(values, 0), "o-", ms=3, color=f"C{i % 10}", label=r["name"])
        ax.fill_between(steps, values.min(0), values.max(0), color=f"C{i % 10}", alpha=0.12)
    ax.set(xlabel="iteration", ylabel="val mIoU (%)", ylim=(0, 101))
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


#: Part of a config's file name -> (backbone's short name, description).
BACKBONES = {
    "_r18-d8_": ("ResNetV1c-18 OS8", "ResNetV1c-18, base 16, output stride 8"),
    "_mscan-t_": ("MSCAN-T", "SegNeXt-T's MSCAN-T with mmseg's settings"),
}


def backbones(configs: Sequence[str]) -> str:
    """'short: description' of the backbones of ``configs`` (by their file names)."""
    used = [(s, d) for key, (s, d) in BACKBONES.items() if any(key in c for c in configs)]
    return "; ".join(f"{short}: {what}" for short, what in used)


def document(
    title: str,
    setting: str,
    rows: Sequence[dict[str, Any]],
    protocol: str,
    threshold: float,
    eval_runs: int,
    curve_interval: int,
    command: str,
    machine: str,
    time_rounds: int = 0,
) -> str:
    """The comparison's markdown: setting, table, per-seed values, how to read it, command."""
    parts = [f"# {title}", "", setting, "", *markdown_table(rows, protocol, threshold), ""]
    parts += ["Per seed:", "", *per_seed_lines(rows), "", notes(rows, protocol, eval_runs)]
    parts += [
        "",
        f"Seeds >= {threshold:g}: runs whose final value reached the threshold (the outcome is "
        f"often bimodal: a run finds the context or it does not). Iterations to {threshold:g}: "
        f"the first validation (every {curve_interval} iterations, same protocol) at or above "
        "it, the median over seeds ('not reached' when more than half never did).",
    ]
    if time_rounds:
        parts += [
            "",
            f"s / iter: one training iteration (batch 8, forward, loss, backward, AdamW step) "
            f"timed after the runs, the heads taking turns for {time_rounds} rounds, median; the "
            "ratio is the median of the per-round ratios, so that the machine's load, which "
            "changes, reaches every head alike.",
        ]
    parts += ["", f"Command: `{command}`", "", f"Machine: {machine}", ""]
    return "\n".join(parts)


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path``, creating its folder."""
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
