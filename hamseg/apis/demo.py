"""The CPU demo: train a head on Context Shapes (:func:`run_demo`), and compare heads over seeds
(:func:`compare_heads`: one run per head and seed in its own process, a table and a chart).

Training goes through mmseg's real pipeline and Runner; docs/demo.md has the numbers.
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
from importlib.metadata import version
from typing import Any, Optional

import numpy as np
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.runner import Runner
from torch import nn

from hamseg.datasets.context_shapes import (
    ContextShapesConfig,
    generate_context_shapes,
    is_generated,
)
from hamseg.utils.errors import UsageError

#: The main demo: HamHead with the NMF ham (relative to the repository root).
DEFAULT_DEMO_CONFIG = "configs/demo/hamhead-nmf_r18-d8_context-shapes.py"
DEMO = "configs/demo"
#: Head name -> config, in table order (the local baseline first).
HEADS: dict[str, str] = {
    "FCN": f"{DEMO}/fcn_r18-d8_context-shapes.py",
    "HamHead-NMF": f"{DEMO}/hamhead-nmf_r18-d8_context-shapes.py",
    "HamHead-CD": f"{DEMO}/hamhead-cd_r18-d8_context-shapes.py",
    "HamHead-VQ": f"{DEMO}/hamhead-vq_r18-d8_context-shapes.py",
    "NonLocal": f"{DEMO}/nonlocal_r18-d8_context-shapes.py",
    "PolyNL": f"{DEMO}/polynl_r18-d8_context-shapes.py",
    # SegNeXt-T (MSCAN-T backbone instead of the R18): mmseg's head and hamseg's.
    "SegNeXt-T LightHamHead (mmseg)": f"{DEMO}/lighthamhead_mscan-t_context-shapes.py",
    "SegNeXt-T HamLightHead": f"{DEMO}/hamlighthead-nmf_mscan-t_context-shapes.py",
}
#: Part of a config's file name -> (backbone's short name, description).
BACKBONES = {
    "_r18-d8_": ("ResNetV1c-18 OS8", "ResNetV1c-18, base 16, output stride 8"),
    "_mscan-t_": ("MSCAN-T", "SegNeXt-T's MSCAN-T with mmseg's settings"),
}


class _Stopwatch(Hook):
    """Wall time of the training iterations and of validation."""

    priority = "VERY_LOW"
    train_time = val_time = _t = 0.0

    def _start(self, *args: Any, **kwargs: Any) -> None:
        self._t = time.perf_counter()

    before_train_iter = before_val_epoch = _start

    def after_train_iter(self, *args: Any, **kwargs: Any) -> None:
        self.train_time += time.perf_counter() - self._t

    def after_val_epoch(self, *args: Any, **kwargs: Any) -> None:
        self.val_time += time.perf_counter() - self._t


def ensure_data(data_root: str, **options: Optional[int]) -> None:
    """Generate Context Shapes into ``data_root`` unless a complete copy is there (with these
    generator options, ``size``, ``num_train``, ``num_val``; any copy without options)."""
    wanted = {k: v for k, v in options.items() if v is not None}
    cfg = ContextShapesConfig(**wanted)
    if not is_generated(data_root, cfg if wanted else None):
        print(f"Generating Context Shapes in {data_root} ...", flush=True)
        generate_context_shapes(data_root, cfg, progress=True)


def set_schedule_length(cfg: Config, max_iters: int) -> None:
    """Set the loop, validation, checkpoint and LR scheduler ends to ``max_iters``; a warm-up
    keeps its length, at most a tenth of the new run."""
    old, warm = cfg.train_cfg.max_iters, max(1, max_iters // 10)
    cfg.train_cfg.max_iters = cfg.train_cfg.val_interval = max_iters
    cfg.default_hooks.checkpoint.interval = max_iters
    for sched in cfg.param_scheduler:
        end = sched.get("end", old)
        sched["end"] = max_iters if end >= old else min(end, warm)
        if sched.get("begin", 0) > 0:
            sched["begin"] = min(sched["begin"], warm)


def _params(module: nn.Module) -> int:
    return int(sum(p.numel() for p in module.parameters()))


def run_demo(
    config: str = DEFAULT_DEMO_CONFIG,
    data_root: str = "data/context_shapes",
    work_dir: Optional[str] = None,
    seed: Optional[int] = None,
    max_iters: Optional[int] = None,
    data_size: Optional[int] = None,
    num_train: Optional[int] = None,
    num_val: Optional[int] = None,
    draw: bool = True,
    cfg_options: Optional[dict] = None,
    json_out: Optional[str] = None,
) -> dict[str, Any]:
    """Generate the data if needed (``data_size``, ``num_train``, ``num_val``), train the demo
    head (``seed`` and ``max_iters`` default to the config's, 0 and 500), validate, return the
    result: ``name, config, seed, max_iters, mIoU, aAcc, mAcc, params, head_params,
    train_time_s, val_time_s, total_time_s, checkpoint, work_dir``, also written to
    ``<work_dir>/demo_result.json`` (``work_dir``: default ``work_dirs/demo/<config name>``) and
    ``json_out``. ``draw=False`` skips the validation prediction images."""
    ensure_data(data_root, size=data_size, num_train=num_train, num_val=num_val)
    cfg = Config.fromfile(config)
    cfg.merge_from_dict(cfg_options or {})
    for loader in ("train_dataloader", "val_dataloader", "test_dataloader"):
        if loader in cfg:
            cfg[loader].dataset.data_root = data_root
    if seed is not None:
        cfg.randomness = dict(seed=seed)
    if max_iters is not None:
        set_schedule_length(cfg, max_iters)
    if not draw:
        cfg.default_hooks.visualization.draw = False
    stem = osp.splitext(osp.basename(config))[0]
    cfg.work_dir, cfg.launcher = work_dir or osp.join("work_dirs", "demo", stem), "none"
    runner, stopwatch = Runner.from_cfg(cfg), _Stopwatch()
    runner.register_hook(stopwatch)
    start = time.perf_counter()
    runner.train()
    metric = lambda key: float(runner.message_hub.get_scalar(f"val/{key}").current())
    result = dict(
        name=cfg.get("demo_name", stem),
        config=config,
        seed=cfg.randomness.get("seed"),
        max_iters=cfg.train_cfg.max_iters,
        **{key: metric(key) for key in ("mIoU", "aAcc", "mAcc")},
        params=_params(runner.model),
        head_params=_params(runner.model.decode_head),
        train_time_s=round(stopwatch.train_time, 2),
        val_time_s=round(stopwatch.val_time, 2),
        total_time_s=round(time.perf_counter() - start, 2),
        checkpoint=osp.join(cfg.work_dir, f"iter_{cfg.train_cfg.max_iters}.pth"),
        work_dir=cfg.work_dir,
    )
    for path in filter(None, (osp.join(cfg.work_dir, "demo_result.json"), json_out)):
        _write(path, json.dumps(result, indent=2))
    return result


def _write(path: str, text: str) -> None:
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


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
    """Train and validate one head with one seed: ``demo_command`` (run_demo.py's options, e.g.
    ``[sys.executable, "tools/run_demo.py"]``) in a fresh process in ``cwd``, its output in
    ``<work_dir>/run.log``; return its result. An existing result is reused unless ``force``.

    Raises:
        RuntimeError: The run failed; the message names its log.
    """
    out_json = osp.join(work_dir, "demo_result.json")
    if force or not osp.isfile(out_json):
        cmd = [*demo_command, "--config", config, "--seed", str(seed), "--work-dir", work_dir]
        cmd += ["--data-root", data_root, "--no-vis"]
        cmd += ["--max-iters", str(max_iters)] if max_iters is not None else []
        os.makedirs(work_dir, exist_ok=True)
        log_path = osp.join(work_dir, "run.log")
        with open(log_path, "w", encoding="utf-8") as log:
            code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd).returncode
        if code != 0:
            raise RuntimeError(f"run failed ({code}): {shlex.join(cmd)}; see {log_path}")
    with open(out_json, encoding="utf-8") as f:
        return json.load(f)


def backbone_of(name: str) -> Optional[str]:
    """Short name of the backbone of the head ``name`` (None if unknown)."""
    config = HEADS.get(name, "")
    return next((short for key, (short, _) in BACKBONES.items() if key in config), None)


def _row(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A head's runs: mean/std (ddof=0) of mIoU over seeds, params, median train time."""
    runs = sorted((r for r in runs if r["name"] == name), key=lambda r: r["seed"])
    miou = np.array([r["mIoU"] for r in runs])
    return dict(
        name=name,
        mean=float(miou.mean()),
        std=float(miou.std()),
        per_seed=miou.tolist(),
        seeds=[r["seed"] for r in runs],
        params=runs[0]["params"],
        head_params=runs[0]["head_params"],
        train_time=float(np.median([r["train_time_s"] for r in runs])),
        max_iters=runs[0]["max_iters"],
    )


def _markdown(rows: list[dict[str, Any]], runs: list[dict[str, Any]], command: str) -> str:
    """The table, with the setting, the effect, the command and the machine."""
    table = [
        "| Head | val mIoU (mean ± std) | per seed | params (total / head) | train time (median) |",
        "| --- | --- | --- | --- | --- |",
    ]
    table += [
        f"| {r['name']} | **{r['mean']:.1f}** ± {r['std']:.1f} | "
        f"{', '.join(f'{v:.1f}' for v in r['per_seed'])} | {r['params'] / 1e6:.2f}M / "
        f"{r['head_params'] / 1e6:.3f}M | {r['train_time']:.0f} s |"
        for r in rows
    ]
    used = {backbone_of(r["name"]) for r in rows}
    backbones = "; ".join(f"{short}: {what}" for short, what in BACKBONES.values() if short in used)
    by = {r["name"]: r["mean"] for r in rows}
    gap = f"HamHead-NMF minus FCN: **{by.get('HamHead-NMF', 0) - by.get('FCN', 0):+.1f}** mIoU "
    total = sum(r["total_time_s"] for r in runs)
    return (
        f"Context Shapes (400 train / 100 val images, 128 x 128, 7 classes), seeds "
        f"{rows[0]['seeds']}, {rows[0]['max_iters']} iterations of batch 8 per run; the same "
        "data, schedule and optimiser for every head, and the same backbone for every head of "
        f"one family, trained from scratch ({backbones}). mIoU on the 100 validation images; "
        "std over seeds (ddof=0); train time is the wall time of the training iterations of one "
        "run (median over seeds).\n\n" + "\n".join(table) + "\n\n"
        + (gap + "points.\n\n" if {"FCN", "HamHead-NMF"} <= set(by) else "")
        + f"Command: `{command}`\n\nMachine: {os.cpu_count()} CPU cores, 1-minute load average "
        f"{os.getloadavg()[0]:.2f} when this table was written, torch {version('torch')}, "
        f"mmseg {version('mmsegmentation')}. {len(runs)} runs, {total / 60:.1f} min of training "
        "and evaluation in total (each run in its own process, including start-up).\n"
    )  # fmt: skip


def chart_labels(rows: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """Title and x labels of the chart: the backbone in the title when all heads share it,
    under each head's name otherwise."""
    backbones = [backbone_of(r["name"]) for r in rows]
    shared = len(set(backbones)) == 1 and backbones[0] is not None
    labels = [r["name"] + (f"\n({b})" if b and not shared else "") for r, b in zip(rows, backbones)]
    seeds = len(rows[0]["seeds"])
    return (
        f"Context Shapes, {backbones[0] + ', ' if shared else ''}{rows[0]['max_iters']} iters, "
        f"{seeds} seed{'s' if seeds != 1 else ''} (dots)"
    ), labels


def _bar_chart(rows: list[dict[str, Any]], out: str) -> None:
    """Bars of mean mIoU with std error bars and the per-seed values as dots."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    title, labels = chart_labels(rows)
    crowded = sum(len(label) for label in labels) > 60  # slanted, so that they do not overlap
    fig, ax = plt.subplots(figsize=(8.8, 4.4) if crowded else (6.4, 3.8), dpi=120)
    colours = {"local": "0.6", "hamseg": "tab:red", "other context": "tab:purple"}
    for i, r in enumerate(rows):
        ours = r["name"].startswith("HamHead") or r["name"].endswith("HamLightHead")
        kind = "local" if r["name"] == "FCN" else "hamseg" if ours else "other context"
        ax.bar(i, r["mean"], yerr=r["std"], color=colours[kind], capsize=4, width=0.65, label=kind)
        ax.scatter(np.full(len(r["per_seed"]), i), r["per_seed"], color="k", s=10, zorder=3)
        ax.text(i, r["mean"] + r["std"] + 1.5, f"{r['mean']:.1f}", ha="center", fontsize=8)
    unique = {name: handle for handle, name in zip(*ax.get_legend_handles_labels())}
    ax.legend(unique.values(), unique.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    ax.set_xticks(range(len(rows)), labels, fontsize=8, rotation=30 if crowded else 0,
                  ha="right" if crowded else "center", rotation_mode="anchor")  # fmt: skip
    ax.set(ylabel="val mIoU (%)", ylim=(0, 105))
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
    """Run every head of :data:`HEADS` in ``heads`` with every seed (:func:`run_one`, a line
    printed per run), then write ``results.md`` (quoting ``command``), ``results.png`` and
    ``runs.json`` into ``out_dir``, the first two also to ``<docs_prefix>.md``/``.png``.
    Returns ``(markdown, md path, png path)``.

    Raises:
        UsageError: A head that is not in :data:`HEADS` (before anything runs).
    """
    unknown = [h for h in heads if h not in HEADS]
    if unknown:
        raise UsageError(f"unknown heads {unknown}; choose from {list(HEADS)}")
    start = time.perf_counter()
    ensure_data(data_root)  # once, before the runs
    runs = []
    for k, (name, seed) in enumerate([(h, s) for h in heads for s in seeds], 1):
        print(f"[{k}/{len(heads) * len(seeds)}] {name} seed {seed} ...", end=" ", flush=True)
        t, stem = time.perf_counter(), osp.splitext(osp.basename(HEADS[name]))[0]
        work_dir = osp.join(out_dir, stem, f"seed{seed}")
        res = run_one(HEADS[name], seed, work_dir, demo_command, data_root, max_iters, force, cwd)
        runs.append(dict(res, name=name))
        print(f"mIoU {res['mIoU']:.1f} ({time.perf_counter() - t:.0f} s)", flush=True)
    rows = [_row(name, runs) for name in heads]
    md = "# Demo heads on Context Shapes\n\n" + _markdown(rows, runs, command.strip())
    md_path, png_path = osp.join(out_dir, "results.md"), osp.join(out_dir, "results.png")
    _write(md_path, md)
    _bar_chart(rows, png_path)
    wall = time.perf_counter() - start
    _write(
        osp.join(out_dir, "runs.json"),
        json.dumps(dict(runs=runs, summary=rows, wall_time_s=wall), indent=2),
    )
    if docs_prefix:
        _write(docs_prefix + ".md", md)
        shutil.copyfile(png_path, docs_prefix + ".png")
    return md, md_path, png_path
