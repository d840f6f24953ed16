"""The targets of the [speed] issue, evaluated on the measured rows that are present.

Hamseg's NMF Hamburger: inference within 1.2x of its compute floor; forward+backward at most half
the time of mmseg's own Hamburger, with less peak memory, and at least 10x faster than
self-attention; at the paper's shape (:data:`~hamseg.benchmark.zoo.PAPER_SHAPE`) the params and
MACs of Table 3 for NMF and CD.
"""

from __future__ import annotations

from typing import Any

from .memory import MIB
from .zoo import PAPER_SHAPE, PAPER_TABLE3


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
