"""Compare the demo heads on Context Shapes: one training run per head and seed, a table, a chart.

Each run is the demo's training (:func:`hamseg.apis.demo.run_demo`) in its own process, started
with a command the caller gives (``tools/run_demo.py``), so runs are independent and an
interrupted comparison resumes: runs whose result JSON exists are not repeated unless forced.
"""

from __future__ import annotations

import json
import os
import os.path as osp
import shlex
import shutil
import subprocess
import time
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from hamseg.utils.errors import UsageError

from .demo import ensure_data

__all__ = [
    "BACKBONES",
    "HEADS",
    "backbone_of",
    "bar_chart",
    "chart_labels",
    "compare_heads",
    "markdown",
    "run_one",
    "summarise",
]

DEMO = "configs/demo"
#: (display name, config) in table order: the local baseline first.
HEADS: list[tuple[str, str]] = [
    ("FCN", f"{DEMO}/fcn_r18-d8_context-shapes.py"),
    ("HamHead-NMF", f"{DEMO}/hamhead-nmf_r18-d8_context-shapes.py"),
    ("HamHead-CD", f"{DEMO}/hamhead-cd_r18-d8_context-shapes.py"),
    ("HamHead-VQ", f"{DEMO}/hamhead-vq_r18-d8_context-shapes.py"),
    ("NonLocal", f"{DEMO}/nonlocal_r18-d8_context-shapes.py"),
    ("PolyNL", f"{DEMO}/polynl_r18-d8_context-shapes.py"),
    # SegNeXt-T (MSCAN-T backbone instead of the R18): mmseg's head and hamseg's.
    ("SegNeXt-T LightHamHead (mmseg)", f"{DEMO}/lighthamhead_mscan-t_context-shapes.py"),
    ("SegNeXt-T HamLightHead", f"{DEMO}/hamlighthead-nmf_mscan-t_context-shapes.py"),
]


def run_one(
    config: str,
    seed: int,
    work_dir: str,
    demo_command: Sequence[str],
    data_root: str,
    max_iters: Optional[int] = None,
    force: bool = False,
    cwd: Optional[str] = None,
) -> dict[str, Any]:
    """Train and validate one head with one seed in a fresh process; return its result.

    Args:
        config: Demo config.
        seed: Training seed.
        work_dir: The run's folder; its ``demo_result.json`` is reused unless ``force``.
        demo_command: Command that starts a demo run and accepts run_demo.py's options,
            e.g. ``[sys.executable, "tools/run_demo.py"]``.
        data_root: Context Shapes folder.
        max_iters: Schedule length (default: the config's).
        force: Repeat the run even if its result exists.
        cwd: Working directory of the run (config paths are relative to it).

    Raises:
        RuntimeError: If the run fails; the message names its log.
    """
    out_json = osp.join(work_dir, "demo_result.json")
    if osp.isfile(out_json) and not force:
        with open(out_json, encoding="utf-8") as f:
            return json.load(f)
    cmd = [*demo_command, "--config", config, "--seed", str(seed), "--work-dir", work_dir]
    cmd += ["--data-root", data_root, "--no-vis"]
    if max_iters is not None:
        cmd += ["--max-iters", str(max_iters)]
    os.makedirs(work_dir, exist_ok=True)
    log_path = osp.join(work_dir, "run.log")
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
    if proc.returncode != 0:
        raise RuntimeError(f"run failed ({proc.returncode}): {shlex.join(cmd)}; see {log_path}")
    with open(out_json, encoding="utf-8") as f:
        return json.load(f)


def summarise(runs: list[dict[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    """Per head: mean/std (ddof=0) of mIoU over seeds, params and median train time per run."""
    rows = []
    for name in order:
        mine = sorted((r for r in runs if r["name"] == name), key=lambda r: r["seed"])
        if not mine:
            continue
        miou = np.array([r["mIoU"] for r in mine])
        rows.append(
            dict(
                name=name,
                mean=float(miou.mean()),
                std=float(miou.std()),
                per_seed=[float(v) for v in miou],
                seeds=[r["seed"] for r in mine],
                params=mine[0]["params"],
                head_params=mine[0]["head_params"],
                train_time=float(np.median([r["train_time_s"] for r in mine])),
                max_iters=mine[0]["max_iters"],
            )
        )
    return rows


def markdown(rows: list[dict[str, Any]], runs: list[dict[str, Any]], command: str) -> str:
    """The results table, with the command, the machine, run times and the effect."""
    from importlib.metadata import version

    lines = [
        "| Head | val mIoU (mean ± std) | per seed | params (total / head) | train time (median) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        seeds = ", ".join(f"{v:.1f}" for v in r["per_seed"])
        lines.append(
            f"| {r['name']} | **{r['mean']:.1f}** ± {r['std']:.1f} | {seeds} | "
            f"{r['params'] / 1e6:.2f}M / {r['head_params'] / 1e6:.3f}M | {r['train_time']:.0f} s |"
        )
    by = {r["name"]: r for r in rows}
    total = sum(r["total_time_s"] for r in runs)
    used = sorted({backbone_of(r["name"]) for r in rows} - {None}, key=list(BACKBONES).index)
    backbones = "; ".join(f"{name}: {BACKBONES[name]}" for name in used)
    text = [
        f"Context Shapes (400 train / 100 val images, 128 x 128, 7 classes), seeds "
        f"{rows[0]['seeds']}, {rows[0]['max_iters']} iterations of batch 8 per run; the same "
        "data, schedule and optimiser for every head, and the same backbone for every head of "
        f"one family, trained from scratch ({backbones}). mIoU on the 100 validation images; "
        "std over seeds (ddof=0); train time is the wall time of the training iterations of one "
        "run (median over seeds).",
        "",
        *lines,
        "",
    ]
    if "FCN" in by and "HamHead-NMF" in by:
        gap = by["HamHead-NMF"]["mean"] - by["FCN"]["mean"]
        text += [f"HamHead-NMF minus FCN: **{gap:+.1f}** mIoU points.", ""]
    text += [
        f"Command: `{command}`",
        "",
        f"Machine: {os.cpu_count()} CPU cores, 1-minute load average {os.getloadavg()[0]:.2f} "
        f"when this table was written, torch {version('torch')}, "
        f"mmseg {version('mmsegmentation')}. "
        f"{len(runs)} runs, {total / 60:.1f} min of training and evaluation in total "
        "(each run in its own process, including start-up).",
    ]
    return "\n".join(text) + "\n"


#: Backbone of a demo config, by a part of its file name: short name -> description.
BACKBONES = {
    "ResNetV1c-18 OS8": "ResNetV1c-18, base 16, output stride 8",
    "MSCAN-T": "SegNeXt-T's MSCAN-T with mmseg's settings",
}
_BACKBONE_KEYS = {"_r18-d8_": "ResNetV1c-18 OS8", "_mscan-t_": "MSCAN-T"}


def backbone_of(name: str) -> Optional[str]:
    """Short name of the backbone of the head ``name`` of :data:`HEADS` (None if unknown)."""
    config = dict(HEADS).get(name, "")
    return next((b for key, b in _BACKBONE_KEYS.items() if key in config), None)


def chart_labels(rows: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """Title and x labels of :func:`bar_chart`: the backbone in the title when every head has
    the same one (from its config in :data:`HEADS`), under each head's name otherwise."""
    backbones = [backbone_of(r["name"]) for r in rows]
    seeds = len(rows[0]["seeds"])
    shared = set(backbones)
    title = "Context Shapes, "
    if len(shared) == 1 and None not in shared:
        title += f"{backbones[0]}, "
        labels = [r["name"] for r in rows]
    else:
        labels = [r["name"] + (f"\n({b})" if b else "") for r, b in zip(rows, backbones)]
    title += f"{rows[0]['max_iters']} iters, {seeds} seed{'s' if seeds != 1 else ''} (dots)"
    return title, labels


def bar_chart(rows: list[dict[str, Any]], out: str) -> None:
    """Bars of mean mIoU with std error bars and the per-seed values as dots."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    title, labels = chart_labels(rows)
    crowded = sum(len(label) for label in labels) > 60  # slanted, so that they do not overlap
    fig, ax = plt.subplots(figsize=(8.8 if crowded else 6.4, 4.4 if crowded else 3.8), dpi=120)
    kinds = {"local": "0.6", "hamseg": "tab:red", "other context": "tab:purple"}
    for i, r in enumerate(rows):
        ours = r["name"].startswith("HamHead") or r["name"].endswith("HamLightHead")
        kind = "local" if r["name"] == "FCN" else "hamseg" if ours else "other context"
        ax.bar(i, r["mean"], yerr=r["std"], color=kinds[kind], capsize=4, width=0.65, label=kind)
        ax.scatter(np.full(len(r["per_seed"]), i), r["per_seed"], color="k", s=10, zorder=3)
        ax.text(i, r["mean"] + r["std"] + 1.5, f"{r['mean']:.1f}", ha="center", fontsize=8)
    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles))
    ax.legend(
        unique.values(), unique.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0)
    )
    ax.set_xticks(
        np.arange(len(rows)),
        labels,
        fontsize=8,
        rotation=30 if crowded else 0,
        ha="right" if crowded else "center",
        rotation_mode="anchor",
    )
    ax.set_ylabel("val mIoU (%)")
    ax.set_ylim(0, 105)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def compare_heads(
    heads: Sequence[str],
    seeds: Sequence[int],
    demo_command: Sequence[str],
    command: str,
    out_dir: str = "work_dirs/demo_compare",
    data_root: str = "data/context_shapes",
    max_iters: Optional[int] = None,
    force: bool = False,
    docs_prefix: Optional[str] = None,
    cwd: Optional[str] = None,
) -> tuple[str, str, str]:
    """Run every head with every seed (see :func:`run_one`), then write the table and chart.

    Prints one line per run. Writes ``results.md``, ``results.png`` and ``runs.json`` into
    ``out_dir``, and ``<docs_prefix>.md``/``.png`` if given.

    Args:
        heads: Display names from :data:`HEADS`.
        seeds: Training seeds.
        demo_command: See :func:`run_one`.
        command: The command line to quote in the table.
        out_dir, data_root, max_iters, force, cwd: See :func:`run_one`.
        docs_prefix: Also copy the table and chart to ``<prefix>.md`` and ``<prefix>.png``.

    Returns:
        ``(markdown, results.md path, results.png path)``.

    Raises:
        UsageError: If a head is not in :data:`HEADS`.
    """
    known = dict(HEADS)
    unknown = [h for h in heads if h not in known]
    if unknown:
        raise UsageError(f"unknown heads {unknown}; choose from {list(known)}")
    start = time.perf_counter()
    ensure_data(data_root)  # once, before the runs
    runs = []
    total = len(heads) * len(seeds)
    k = 0
    for name in heads:
        for seed in seeds:
            k += 1
            stem = osp.splitext(osp.basename(known[name]))[0]
            work_dir = osp.join(out_dir, stem, f"seed{seed}")
            t = time.perf_counter()
            print(f"[{k}/{total}] {name} seed {seed} ...", end=" ", flush=True)
            res = run_one(
                known[name], seed, work_dir, demo_command, data_root, max_iters, force, cwd
            )
            res["name"] = name
            runs.append(res)
            print(f"mIoU {res['mIoU']:.1f} ({time.perf_counter() - t:.0f} s)", flush=True)
    wall = time.perf_counter() - start
    rows = summarise(runs, list(heads))
    os.makedirs(out_dir, exist_ok=True)
    md = "# Demo heads on Context Shapes\n\n" + markdown(rows, runs, command.strip())
    md_path, png_path = osp.join(out_dir, "results.md"), osp.join(out_dir, "results.png")
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(md)
    bar_chart(rows, png_path)
    with open(osp.join(out_dir, "runs.json"), "w", encoding="utf-8") as f:
        json.dump(dict(runs=runs, summary=rows, wall_time_s=wall), f, indent=2)
    if docs_prefix:
        os.makedirs(osp.dirname(osp.abspath(docs_prefix)), exist_ok=True)
        shutil.copyfile(md_path, docs_prefix + ".md")
        shutil.copyfile(png_path, docs_prefix + ".png")
    return md, md_path, png_path
