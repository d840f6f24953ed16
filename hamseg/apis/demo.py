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
from collections.abc import Callable, Sequence
from importlib.metadata import version
from typing import Any, Optional

import numpy as np
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.runner import Runner

from hamseg.compat.package_lookup import config_file, hamseg_config_path
from hamseg.datasets import context_shapes as shapes
from hamseg.datasets.checks import check_dataset_paths
from hamseg.utils.config import dataset_classes
from hamseg.utils.errors import UsageError

#: The main demo: HamHead with the NMF ham (the packaged config: a checkout's or a wheel's).
DEFAULT_DEMO_CONFIG = "hamseg::demo/hamhead-nmf_r18-d8_context-shapes.py"
#: Iterations between a demo run's checkpoints (the last two are kept; the final one always).
CHECKPOINT_INTERVAL = 100
DEMO = "configs/demo"
#: ``--heads`` name -> (table label, config), in table order (the local baseline first); the
#: SegNeXt-T heads train MSCAN-T instead of the R18: mmseg's head and hamseg's.
HEADS: dict[str, tuple[str, str]] = {
    "fcn": ("FCN", f"{DEMO}/fcn_r18-d8_context-shapes.py"),
    "ham-nmf": ("HamHead-NMF", f"{DEMO}/hamhead-nmf_r18-d8_context-shapes.py"),
    "ham-cd": ("HamHead-CD", f"{DEMO}/hamhead-cd_r18-d8_context-shapes.py"),
    "ham-vq": ("HamHead-VQ", f"{DEMO}/hamhead-vq_r18-d8_context-shapes.py"),
    "nonlocal": ("NonLocal", f"{DEMO}/nonlocal_r18-d8_context-shapes.py"),
    "polynl": ("PolyNL", f"{DEMO}/polynl_r18-d8_context-shapes.py"),
    "attnconv": ("AttnConv", f"{DEMO}/attnconv_r18-d8_context-shapes.py"),
    "segnext-mmseg": ("SegNeXt-T LightHamHead (mmseg)",
                      f"{DEMO}/lighthamhead_mscan-t_context-shapes.py"),
    "segnext": ("SegNeXt-T HamLightHead", f"{DEMO}/hamlighthead-nmf_mscan-t_context-shapes.py"),
}  # fmt: skip
#: What ``data_config`` gives every head (with its data preprocessor and class count).
LOADERS = ("train_dataloader", "val_dataloader", "test_dataloader")
DATA_KEYS = (*LOADERS, "val_evaluator", "test_evaluator")
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
    """Generate Context Shapes into ``data_root`` unless a complete copy (with these generator
    ``options``, if any) is there."""
    wanted = {k: v for k, v in options.items() if v is not None}
    cfg = shapes.ContextShapesConfig(**wanted)
    if not shapes.is_generated(data_root, cfg if wanted else None):
        print(f"Generating Context Shapes in {data_root} ...", flush=True)
        shapes.generate_context_shapes(data_root, cfg, progress=True)


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


def head_config(
    config: str, data_config: Optional[str] = None, data_root: Optional[str] = None
) -> Config:
    """The head ``config`` on the data of ``data_config`` (its :data:`DATA_KEYS`, data
    preprocessor and class count), the loaders' root ``data_root``.

    Both may be files or packaged names (``hamseg::demo/...``, ``mmseg::...``).

    Raises:
        FileNotFoundError: No config file at ``config`` or ``data_config``.
    """
    paths = {}
    for flag, path in (("--config", config), ("--data-config", data_config)):
        try:
            paths[flag] = path and config_file(path)
        except FileNotFoundError as err:  # a packaged name says where it looked
            detail = err if "::" in path else "no such config file"
            raise FileNotFoundError(f"{flag} {path}: {detail}") from None
    cfg = Config.fromfile(paths["--config"])
    if data_config:
        data = Config.fromfile(paths["--data-config"])
        for key in (k for k in DATA_KEYS if k in data):
            cfg[key] = data[key]
        model, train = data.get("model", {}), data.train_dataloader.dataset
        num = model.get("decode_head", {}).get("num_classes")
        cfg.model.decode_head.num_classes = num or len(dataset_classes(train))
        if "data_preprocessor" in model:
            cfg.model.data_preprocessor = model.data_preprocessor
    for loader in LOADERS if data_root else ():
        cfg[loader].dataset.data_root = data_root
    return cfg


def run_demo(
    config: str = DEFAULT_DEMO_CONFIG, data_root: Optional[str] = None,
    work_dir: Optional[str] = None, seed: Optional[int] = None, max_iters: Optional[int] = None,
    data_size: Optional[int] = None, num_train: Optional[int] = None,
    num_val: Optional[int] = None, draw: bool = True, cfg_options: Optional[dict] = None,
    json_out: Optional[str] = None, data_config: Optional[str] = None,
    checkpoint_interval: int = CHECKPOINT_INTERVAL,
    prepare: Optional[Callable[[Config], bool]] = None,
) -> dict[str, Any]:  # fmt: skip
    """Train and validate the head of ``config`` on Context Shapes (generated into ``data_root``,
    default data/context_shapes, if needed) or the data of ``data_config`` (:func:`head_config`);
    return the result (mIoU, params, times, checkpoint, ...), also written to
    ``<work_dir>/demo_result.json`` and ``json_out``. ``draw=False``: no prediction images.
    A checkpoint every ``checkpoint_interval`` iterations. ``prepare(cfg)`` runs before the
    Runner is built (tools/run_demo.py: the guard hooks, ``--resume``); False: the run is
    already complete, and its saved result is returned."""
    if not data_config:
        data_root = data_root or "data/context_shapes"
        ensure_data(data_root, size=data_size, num_train=num_train, num_val=num_val)
    cfg = head_config(config, data_config, data_root)
    cfg.merge_from_dict(cfg_options or {})
    if data_config:
        check_dataset_paths(cfg)
    if seed is not None:
        cfg.randomness = dict(seed=seed)
    if max_iters is not None:
        set_schedule_length(cfg, max_iters)
    if not draw:
        cfg.default_hooks.visualization.draw = False
    checkpoint = cfg.default_hooks.checkpoint
    checkpoint.update(interval=min(checkpoint_interval, cfg.train_cfg.max_iters), max_keep_ckpts=2)
    stem = osp.splitext(osp.basename(config))[0]
    cfg.work_dir, cfg.launcher = work_dir or osp.join("work_dirs", "demo", stem), "none"
    saved = osp.join(cfg.work_dir, "demo_result.json")
    if prepare is not None and not prepare(cfg):
        with open(saved, encoding="utf-8") as f:
            return json.load(f)
    runner, stopwatch = Runner.from_cfg(cfg), _Stopwatch()
    runner.register_hook(stopwatch)
    start = time.perf_counter()
    runner.train()
    metric = lambda key: float(runner.message_hub.get_scalar(f"val/{key}").current())
    params = lambda m: int(sum(p.numel() for p in m.parameters()))  # noqa: E731
    result = dict(
        name=cfg.get("demo_name", stem), config=config, seed=cfg.randomness.get("seed"),
        max_iters=cfg.train_cfg.max_iters, **{key: metric(key) for key in ("mIoU", "aAcc", "mAcc")},
        params=params(runner.model), head_params=params(runner.model.decode_head),
        train_time_s=round(stopwatch.train_time, 2), val_time_s=round(stopwatch.val_time, 2),
        total_time_s=round(time.perf_counter() - start, 2), work_dir=cfg.work_dir,
        checkpoint=osp.join(cfg.work_dir, f"iter_{cfg.train_cfg.max_iters}.pth"),
    )  # fmt: skip
    for path in filter(None, (saved, json_out)):
        _write(path, json.dumps(result, indent=2))
    return result


def demo_command_for(checkpoint: str) -> Optional[str]:
    """The ``tools/run_demo.py`` command that writes ``checkpoint``, if it is a demo checkpoint
    (``work_dirs/demo/<demo config name>/iter_<N>.pth``, where :func:`run_demo` writes it)."""
    parts = osp.normpath(checkpoint).split(os.sep)
    name = f"demo/{parts[-2]}.py" if len(parts) >= 4 else ""
    iters = parts[-1].removeprefix("iter_").removesuffix(".pth")
    if parts[-4:-2] != ["work_dirs", "demo"] or not iters.isdigit():
        return None
    if f"configs/{name}" not in dict(HEADS.values()).values():
        return None
    args = ["python", "tools/run_demo.py"]
    args += ["--config", f"configs/{name}"] if f"configs/{name}" != DEFAULT_DEMO_CONFIG else []
    if int(iters) != Config.fromfile(hamseg_config_path(name)).train_cfg.max_iters:
        args += ["--max-iters", iters]
    return shlex.join(args)


def _write(path: str, text: str) -> None:
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def run_one(
    config: str, seed: int, work_dir: str, demo_command: Sequence[str], data_root: Optional[str],
    max_iters: Optional[int] = None, force: bool = False, cwd: Optional[str] = None,
    data_config: Optional[str] = None,
) -> dict[str, Any]:  # fmt: skip
    """Train and validate one head with one seed: ``demo_command`` (e.g. ``[sys.executable,
    "tools/run_demo.py"]``) in a fresh process in ``cwd``, logging to ``<work_dir>/run.log``;
    return its result. An existing result is reused unless ``force``.

    Raises:
        RuntimeError: The run failed; the message names its log.
    """
    out_json = osp.join(work_dir, "demo_result.json")
    if force or not osp.isfile(out_json):
        cmd = [*demo_command, "--config", config, "--seed", str(seed), "--work-dir", work_dir]
        cmd += ["--data-root", data_root] if data_root else []
        cmd += ["--no-vis"] + (["--max-iters", str(max_iters)] if max_iters is not None else [])
        cmd += ["--data-config", data_config] if data_config else []
        os.makedirs(work_dir, exist_ok=True)
        log_path = osp.join(work_dir, "run.log")
        with open(log_path, "w", encoding="utf-8") as log:
            code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd).returncode
        if code != 0:
            raise RuntimeError(f"run failed ({code}): {shlex.join(cmd)}; see {log_path}")
    with open(out_json, encoding="utf-8") as f:
        return json.load(f)


def backbone_of(name: str) -> Optional[str]:
    """Short name of the backbone of the head labelled ``name`` (None if unknown)."""
    config = next((c for label, c in HEADS.values() if label == name), "")
    return next((short for key, (short, _) in BACKBONES.items() if key in config), None)


def _row(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A head's runs: mean/std (ddof=0) of mIoU over seeds, params, median train time."""
    runs = sorted((r for r in runs if r["name"] == name), key=lambda r: r["seed"])
    miou, one = np.array([r["mIoU"] for r in runs]), runs[0]
    return dict(
        name=name, mean=float(miou.mean()), std=float(miou.std()), per_seed=miou.tolist(),
        seeds=[r["seed"] for r in runs], params=one["params"], head_params=one["head_params"],
        max_iters=one["max_iters"], train_time=float(np.median([r["train_time_s"] for r in runs])),
    )  # fmt: skip


def _markdown(rows: list[dict], runs: list[dict], command: str, data: Optional[str]) -> str:
    """The table, with the setting (the data of ``data``, a config, or Context Shapes), the
    effect, the command and the machine."""
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
    setting = "Context Shapes (400 train / 100 val images, 128 x 128, 7 classes)"
    setting = f"The data of `{data}`" if data else setting
    return (
        f"{setting}, seeds {rows[0]['seeds']}, {rows[0]['max_iters']} iterations per run; the "
        "same data, schedule and optimiser for every head, and the same backbone for every head"
        f" of one family, trained from scratch ({backbones}). mIoU on the validation split; "
        "std over seeds (ddof=0); train time is the wall time of the training iterations of one "
        "run (median over seeds).\n\n" + "\n".join(table) + "\n\n"
        + (gap + "points.\n\n" if {"FCN", "HamHead-NMF"} <= set(by) else "")
        + f"Command: `{command}`\n\nMachine: {os.cpu_count()} CPU cores, 1-minute load average "
        f"{os.getloadavg()[0]:.2f} when this table was written, torch {version('torch')}, "
        f"mmseg {version('mmsegmentation')}. {len(runs)} runs, {total / 60:.1f} min of training "
        "and evaluation in total (each run in its own process, including start-up).\n"
    )  # fmt: skip


def chart_labels(rows: list[dict], data: Optional[str] = None) -> tuple[str, list[str]]:
    """Title and x labels of the chart on Context Shapes or the data of config ``data``: the
    backbone in the title when all heads share it, under each head's name otherwise."""
    backbones = [backbone_of(r["name"]) for r in rows]
    shared = len(set(backbones)) == 1 and backbones[0] is not None
    labels = [r["name"] + (f"\n({b})" if b and not shared else "") for r, b in zip(rows, backbones)]
    seeds = len(rows[0]["seeds"])
    return (
        f"{osp.basename(data) if data else 'Context Shapes'}, "
        f"{backbones[0] + ', ' if shared else ''}{rows[0]['max_iters']} iters, "
        f"{seeds} seed{'s' if seeds != 1 else ''} (dots)"
    ), labels


def _bar_chart(rows: list[dict[str, Any]], out: str, data: Optional[str]) -> None:
    """Bars of mean mIoU with std error bars and the per-seed values as dots."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    title, labels = chart_labels(rows, data)
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
    heads: Sequence[str], seeds: Sequence[int], demo_command: Sequence[str], command: str,
    out_dir: str = "work_dirs/demo_compare", data_root: Optional[str] = None,
    max_iters: Optional[int] = None, force: bool = False, docs_prefix: Optional[str] = None,
    cwd: Optional[str] = None, data_config: Optional[str] = None,
) -> tuple[str, str, str]:  # fmt: skip
    """Run every head of :data:`HEADS` in ``heads`` with every seed (:func:`run_one`) on Context
    Shapes in ``data_root`` or the data of ``data_config``; write ``results.md`` (quoting
    ``command``), ``results.png``, ``runs.json`` into ``out_dir``, the first two also to
    ``<docs_prefix>.md``/``.png``. Returns ``(markdown, md path, png path)``.

    Raises:
        UsageError: An unknown head; FileNotFoundError: no config or data (checked first).
    """
    if unknown := [h for h in heads if h not in HEADS]:
        raise UsageError(f"--heads: unknown {', '.join(unknown)}; choose from {', '.join(HEADS)}")
    start = time.perf_counter()
    if data_config:  # the data of the first head's merged config, checked once
        check_dataset_paths(head_config(HEADS[heads[0]][1], data_config, data_root))
    else:
        ensure_data(data_root := data_root or "data/context_shapes")  # once, before the runs
    runs, todo = [], [(h, s) for h in heads for s in seeds]
    for k, (head, seed) in enumerate(todo, 1):
        (name, config), t = HEADS[head], time.perf_counter()
        print(f"[{k}/{len(todo)}] {name} seed {seed} ...", end=" ", flush=True)
        work_dir = osp.join(out_dir, osp.splitext(osp.basename(config))[0], f"seed{seed}")
        args = (demo_command, data_root, max_iters, force, cwd, data_config)
        runs.append(dict(res := run_one(config, seed, work_dir, *args), name=name))
        print(f"mIoU {res['mIoU']:.1f} ({time.perf_counter() - t:.0f} s)", flush=True)
    rows = [_row(HEADS[h][0], runs) for h in heads]
    title = (
        f"Heads on {osp.basename(data_config)}" if data_config else "Demo heads on Context Shapes"
    )
    md = f"# {title}\n\n" + _markdown(rows, runs, command.strip(), data_config)
    md_path, png_path = osp.join(out_dir, "results.md"), osp.join(out_dir, "results.png")
    _write(md_path, md)
    _bar_chart(rows, png_path, data_config)
    summary = dict(runs=runs, summary=rows, wall_time_s=time.perf_counter() - start)
    _write(osp.join(out_dir, "runs.json"), json.dumps(summary, indent=2))
    if docs_prefix:
        _write(docs_prefix + ".md", md)
        shutil.copyfile(png_path, docs_prefix + ".png")
    return md, md_path, png_path
