"""Compare decode heads on a demo task (or your data) over seeds, under one evaluation protocol.

Each run (head x seed) trains in its own process (``tools/run_demo.py`` on a config written for
that run, validating every ``curve_interval`` iterations for the learning curve), then is
evaluated here under both protocols: the paper's (a fresh random dictionary per forward, the
mean over ``eval_runs`` evaluations) and hamseg's ensemble (the mean of 12 seeded draws); heads
without a ham are deterministic and evaluated once. Every run leaves ``run.json`` in its folder,
so an interrupted comparison resumes. :func:`time_heads` times training iterations of the heads
in turn. Tables and charts: :mod:`~tools.lab.analysis.head_report`. docs/demo.md.
"""

from __future__ import annotations

import glob
import json
import os
import os.path as osp
import shlex
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from typing import Any, Optional

import torch
from mmengine.config import Config
from mmengine.optim import OptimWrapper
from mmengine.registry import init_default_scope
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample

from hamseg.apis.demo import head_config, set_schedule_length
from hamseg.datasets import context_shapes
from hamseg.datasets.checks import check_dataset_paths
from hamseg.utils.errors import UsageError

from . import context_rooms
from .eval_variance import Evaluation, set_eval_draws

DEMO = "configs/demo"
#: The lab's own configs: heads and tasks whose code is outside hamseg (tools/lab/).
LAB = "tools/lab/configs"


@dataclass(frozen=True)
class Head:
    """A row of the comparison: ``label``, the ``config`` it trains and config ``options``
    (dotted keys) on top; ``kind``: 'local' or 'global pooling' (the controls), 'ham' (its
    ``ham_cfg`` takes the protocol), 'random ham' (mmseg's LightHamHead: a new dictionary at
    every forward, the paper's protocol only) or 'context'. A head whose code is outside
    hamseg (the lab's, tools/lab/models/) has a config that imports it (``custom_imports``),
    and every run's config keeps that import."""

    label: str
    config: str
    kind: str = "context"
    options: dict[str, Any] = field(default_factory=dict)


def _ham(label: str, config: str, **options: Any) -> Head:
    return Head(label, f"{DEMO}/{config}", "ham", options)


BPTT = {"model.decode_head.ham_cfg.grad": "bptt"}
#: ``--heads`` name -> :class:`Head`, in table order: the controls, the hams (one-step and
#: BPTT, and NMF at the other heads' parameter budget), attention, SegNeXt-T.
HEADS: dict[str, Head] = {
    "fcn": Head("FCN", f"{DEMO}/fcn_r18-d8_context-shapes.py", "local"),
    "gap": Head("GAP", f"{DEMO}/psphead-gap_r18-d8_context-shapes.py", "global pooling"),
    "ham-nmf": _ham("HamHead-NMF", "hamhead-nmf_r18-d8_context-shapes.py"),
    "ham-nmf-bptt": _ham("HamHead-NMF BPTT", "hamhead-nmf_r18-d8_context-shapes.py", **BPTT),
    "ham-nmf-208": _ham(
        "HamHead-NMF 208ch",
        "hamhead-nmf_r18-d8_context-shapes.py",
        **{"model.decode_head.ham_channels": 208},
    ),
    "ham-cd": _ham("HamHead-CD", "hamhead-cd_r18-d8_context-shapes.py"),
    "ham-cd-bptt": _ham("HamHead-CD BPTT", "hamhead-cd_r18-d8_context-shapes.py", **BPTT),
    "ham-vq": _ham("HamHead-VQ", "hamhead-vq_r18-d8_context-shapes.py"),
    "ham-vq-bptt": _ham("HamHead-VQ BPTT", "hamhead-vq_r18-d8_context-shapes.py", **BPTT),
    "nonlocal": Head("NonLocal", f"{DEMO}/nonlocal_r18-d8_context-shapes.py"),
    "polynl": Head("PolyNL", f"{LAB}/polynl_r18-d8_context-shapes.py"),
    "attnconv": Head("AttnConv", f"{LAB}/attnconv_r18-d8_context-shapes.py"),
    "segnext-mmseg": Head(
        "SegNeXt-T LightHamHead (mmseg)",
        f"{DEMO}/lighthamhead_mscan-t_context-shapes.py",
        "random ham",
    ),
    "segnext": _ham("SegNeXt-T HamLightHead", "hamlighthead-nmf_mscan-t_context-shapes.py"),
}


@dataclass(frozen=True)
class Task:
    """A generated demo task: its ``label``, default ``data_root``, dataset config (None: the
    demo configs' own, Context Shapes) and generator (module with ``is_generated`` and a
    ``generate_*`` function); the dataset config of a task whose code is outside hamseg (the
    lab's) imports it (``custom_imports``), and every run's config keeps that import."""

    label: str
    data_root: str
    data_config: Optional[str]
    generator: Any

    def ensure(self, root: str) -> None:
        """Generate the task into ``root`` unless a complete default copy is there."""
        if not self.generator.is_generated(root):
            print(f"Generating {self.label} in {root} ...", flush=True)
            name = next(n for n in dir(self.generator) if n.startswith("generate_"))
            getattr(self.generator, name)(root, progress=True)


TASKS = {
    "shapes": Task("Context Shapes", "data/context_shapes", None, context_shapes),
    "rooms": Task(
        "Context Rooms",
        "data/context_rooms",
        "tools/lab/configs/context_rooms.py",
        context_rooms,
    ),
}
#: The evaluation protocols: the ham settings of each (docs/evaluation.md).
PROTOCOLS = {
    "paper": dict(eval_seed=None, eval_draws=1),
    "ensemble": dict(eval_seed=0, eval_draws=12),
}


def parse_variant(spec: Sequence[str]) -> tuple[str, Head]:
    """``NAME BASE KEY=VALUE ...`` -> (NAME, BASE's head with those config options, labelled
    NAME); values are Python literals where they parse as one (``R=32``, ``grad=bptt``).

    Raises:
        UsageError: Fewer than two words, an unknown BASE, or an option without '='.
    """
    import ast

    if len(spec) < 2 or spec[1] not in HEADS:
        raise UsageError(
            f"--variant {' '.join(spec)}: give NAME BASE KEY=VALUE ..., BASE one of "
            f"{', '.join(HEADS)}"
        )
    base = HEADS[spec[1]]
    options = dict(HEADS[spec[1]].options)
    for item in spec[2:]:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--variant {spec[0]}: {item!r} is not KEY=VALUE")
        try:
            options[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            options[key] = value
    return spec[0], Head(spec[0], base.config, base.kind, options)


def run_config(
    head: Head,
    task: Task,
    protocol: str,
    data_root: Optional[str] = None,
    data_config: Optional[str] = None,
    max_iters: Optional[int] = None,
    curve_interval: int = 100,
    cfg_options: Optional[dict[str, Any]] = None,
) -> Config:
    """The whole config of one run: ``head`` on the task's data (or ``data_config``'s,
    :func:`hamseg.apis.demo.head_config`), its options, then ``cfg_options``, the protocol's
    ham settings, the schedule and a validation every ``curve_interval`` iterations. The head's
    and the data config's ``custom_imports`` (a lab head's or a lab task's code) come with
    :func:`hamseg.apis.demo.head_config`."""
    cfg = head_config(head.config, data_config or task.data_config, data_root)
    cfg.merge_from_dict({**head.options, **(cfg_options or {})})
    if head.kind == "ham":
        cfg.model.decode_head.ham_cfg.update(PROTOCOLS[protocol])
    if max_iters is not None:
        set_schedule_length(cfg, max_iters)
    end = cfg.train_cfg.max_iters
    cfg.train_cfg.val_interval = curve_interval if 0 < curve_interval < end else end
    cfg.default_hooks.checkpoint.interval = end
    cfg.demo_name = head.label
    return cfg


def learning_curve(work_dir: str) -> list[tuple[int, float]]:
    """(iteration, val mIoU) of the last training log under ``work_dir`` that has any."""
    for path in sorted(glob.glob(osp.join(work_dir, "*", "vis_data", "scalars.json")))[::-1]:
        with open(path, encoding="utf-8") as f:
            points = [json.loads(line) for line in f if '"mIoU"' in line]
        if points:
            return [(int(p["step"]), float(p["mIoU"])) for p in points]
    return []


def evaluate_protocols(
    cfg: Config, checkpoint: str, kind: str, eval_runs: int, work_dir: str
) -> dict[str, Any]:
    """The checkpoint's val mIoU under each protocol: ``paper`` (a list, one per evaluation
    with fresh random dictionaries, seeded 0, 1, ... for repeatability) and ``ensemble`` for a
    hamseg ham; ``deterministic`` (one value) for a head without a ham; ``paper`` only for
    mmseg's LightHamHead."""
    cfg = cfg.copy()
    cfg.work_dir = osp.join(work_dir, "eval")
    cfg.launcher = "none"
    cfg.test_dataloader = cfg.val_dataloader
    cfg.test_dataloader.update(num_workers=0, persistent_workers=False)
    cfg.default_hooks.visualization.draw = False
    cfg.log_level = "WARNING"  # the training log has the per-class tables
    evaluation = Evaluation(cfg, checkpoint)
    if kind not in ("ham", "random ham"):
        return dict(deterministic=evaluation())
    if kind == "ham":
        set_eval_draws(evaluation.model, *PROTOCOLS["paper"].values())
    paper = []
    for run in range(eval_runs):
        torch.manual_seed(run)
        paper.append(evaluation())
    out: dict[str, Any] = dict(paper=paper)
    if kind == "ham":
        set_eval_draws(evaluation.model, *PROTOCOLS["ensemble"].values())
        out["ensemble"] = evaluation()
    return out


def run_head(
    key: str,
    head: Head,
    seed: int,
    cfg: Config,
    work_dir: str,
    demo_command: Sequence[str],
    eval_runs: int = 5,
    force: bool = False,
    cwd: Optional[str] = None,
) -> dict[str, Any]:
    """Train ``cfg`` with ``seed`` in a fresh process (``demo_command``, e.g. ``[sys.executable,
    "tools/run_demo.py"]``, in ``cwd``; log ``<work_dir>/run.log``), evaluate it under both
    protocols and return the run (also ``<work_dir>/run.json``); an existing run.json with the
    same config and ``eval_runs`` is reused unless ``force``.

    Raises:
        RuntimeError: The training failed; the message names its log.
    """
    run_json = osp.join(work_dir, "run.json")
    config_path = osp.join(work_dir, "config.py")
    os.makedirs(work_dir, exist_ok=True)
    text = cfg.pretty_text
    if not force and osp.isfile(run_json):
        with open(run_json, encoding="utf-8") as f:
            run = json.load(f)
        if run.get("config_text") == text and run.get("eval_runs") == eval_runs:
            return run
    with open(config_path, "w", encoding="utf-8") as f:
        f.write(text)
    cmd = [*demo_command, "--config", config_path, "--data-config", config_path]
    cmd += ["--seed", str(seed), "--work-dir", work_dir, "--no-vis"]
    log_path = osp.join(work_dir, "run.log")
    with open(log_path, "w", encoding="utf-8") as log:
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd).returncode
    if code != 0:
        raise RuntimeError(f"run failed ({code}): {shlex.join(cmd)}; see {log_path}")
    with open(osp.join(work_dir, "demo_result.json"), encoding="utf-8") as f:
        result = json.load(f)
    start = time.perf_counter()
    evaluated = evaluate_protocols(
        Config.fromfile(config_path), result["checkpoint"], head.kind, eval_runs, work_dir
    )
    run = dict(
        key=key,
        name=head.label,
        kind=head.kind,
        seed=seed,
        result=result,
        curve=learning_curve(work_dir),
        eval=evaluated,
        eval_runs=eval_runs,
        eval_time_s=round(time.perf_counter() - start, 2),
        config_text=text,
    )
    with open(run_json, "w", encoding="utf-8") as f:
        json.dump(run, f, indent=1)
    return run


def time_heads(
    configs: dict[str, Config], rounds: int = 10, warmup: int = 2, batch: int = 8, size: int = 128
) -> dict[str, list[float]]:
    """Seconds of one training iteration (forward, loss, backward, AdamW step) of each model
    of ``configs`` on one random batch of ``batch`` images of ``size`` x ``size``, the heads
    taking turns round by round (order reversed every other round) so that the machine's load
    reaches all alike."""
    steps: dict[str, Any] = {}
    for name, cfg in configs.items():
        init_default_scope(cfg.get("default_scope", "mmseg"))
        torch.manual_seed(0)
        model = MODELS.build(cfg.model)
        model.init_weights()
        model.train()
        wrapper = OptimWrapper(torch.optim.AdamW(model.parameters(), lr=1e-3))
        classes = cfg.model.decode_head.num_classes
        g = torch.Generator().manual_seed(1)
        inputs = []
        samples = []
        for _ in range(batch):
            inputs.append(torch.randint(0, 256, (3, size, size), generator=g).float())
            sample = SegDataSample(metainfo=dict(img_shape=(size, size), ori_shape=(size, size)))
            sample.gt_sem_seg = PixelData(
                data=torch.randint(0, classes, (1, size, size), generator=g)
            )
            samples.append(sample)
        data = dict(inputs=inputs, data_samples=samples)
        steps[name] = lambda m=model, w=wrapper, d=data: m.train_step(d, w)
    for step in steps.values():
        for _ in range(warmup):
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for i in range(rounds):
        for name in list(steps)[:: -1 if i % 2 else 1]:
            start = time.perf_counter()
            steps[name]()
            times[name].append(time.perf_counter() - start)
    return times


def compare_heads(
    heads: Sequence[str],
    seeds: Sequence[int],
    demo_command: Sequence[str],
    command: str,
    task: str = "shapes",
    protocol: str = "paper",
    out_dir: str = "work_dirs/demo_compare",
    variants: Sequence[Sequence[str]] = (),
    cfg_options: Optional[dict[str, Any]] = None,
    data_root: Optional[str] = None,
    data_config: Optional[str] = None,
    max_iters: Optional[int] = None,
    curve_interval: int = 100,
    eval_runs: int = 5,
    threshold: float = 90.0,
    time_rounds: int = 10,
    force: bool = False,
    docs_prefix: Optional[str] = None,
    cwd: Optional[str] = None,
) -> tuple[str, list[str]]:
    """Run every head of ``heads`` (keys of :data:`HEADS` or of ``variants``, :func:`
    parse_variant`) with every seed (:func:`run_head`) on ``task`` (or the data of
    ``data_config``), time them (:func:`time_heads`, ``time_rounds`` > 0) and write
    ``results.md``, ``results.png`` (per-seed dots), ``curves.png`` and ``runs.json`` into
    ``out_dir`` (also ``<docs_prefix>.md``, ``.png``, ``_curves.png``). Returns the markdown and
    the files written.

    Raises:
        UsageError: An unknown head, task or protocol, a bad variant; FileNotFoundError: no
            config or data (checked before any run).
    """
    from . import head_report as report

    table = dict(HEADS)
    table.update(parse_variant(v) for v in variants)
    if unknown := [h for h in heads if h not in table]:
        raise UsageError(f"--heads: unknown {', '.join(unknown)}; choose from {', '.join(table)}")
    if task not in TASKS or protocol not in PROTOCOLS:
        raise UsageError(
            f"--task {task} / --protocol {protocol}: choose a task from {', '.join(TASKS)} and "
            f"a protocol from {', '.join(PROTOCOLS)}"
        )
    spec = TASKS[task]
    configs = {
        key: run_config(
            table[key],
            spec,
            protocol,
            data_root,
            data_config,
            max_iters,
            curve_interval,
            cfg_options,
        )
        for key in heads
    }  # every config is built (and its files checked) before any run
    if data_config:
        check_dataset_paths(configs[heads[0]])
    else:
        spec.ensure(data_root or spec.data_root)
    start = time.perf_counter()
    runs = []
    todo = [(key, seed) for key in heads for seed in seeds]
    for k, (key, seed) in enumerate(todo, 1):
        print(f"[{k}/{len(todo)}] {table[key].label} seed {seed} ...", end=" ", flush=True)
        t = time.perf_counter()
        work_dir = osp.join(out_dir, key, f"seed{seed}")
        run = run_head(
            key, table[key], seed, configs[key], work_dir, demo_command, eval_runs, force, cwd
        )
        runs.append(run)
        value = report.final_value(run, protocol)
        print(f"mIoU {value:.1f} ({time.perf_counter() - t:.0f} s)", flush=True)
    timings = _timings(configs, time_rounds, out_dir, force) if time_rounds > 0 else None
    rows = report.summary_rows(runs, heads, protocol, threshold, timings)
    what = f"the data of `{data_config}`" if data_config else spec.label
    title = f"Heads on {what}"
    setting = (
        f"{what[0].upper() + what[1:]}, seeds {list(seeds)}, {rows[0]['max_iters']} iterations "
        f"per run; the same data, schedule and optimiser for every head, and the same backbone "
        f"for every head of one family, trained from scratch "
        f"({report.backbones([table[k].config for k in heads])}). Values: val mIoU."
    )
    machine = (
        f"{os.cpu_count()} CPU cores, torch {version('torch')} ({torch.get_num_threads()} "
        f"threads here), mmseg {version('mmsegmentation')}; {len(runs)} runs, "
        f"{sum(r['result']['total_time_s'] + r['eval_time_s'] for r in runs) / 60:.0f} min of "
        "training and evaluation in total (each training in its own process)."
    )
    md = report.document(
        title,
        setting,
        rows,
        protocol,
        threshold,
        eval_runs,
        curve_interval,
        command.strip(),
        machine,
        time_rounds if timings else 0,
    )
    paths = [osp.join(out_dir, n) for n in ("results.md", "results.png", "curves.png")]
    report.write_text(paths[0], md)
    chart_title = f"{what}, {rows[0]['max_iters']} iters, n = {len(seeds)} seeds"
    report.dots_chart(rows, paths[1], chart_title, threshold)
    report.curves_chart(runs, rows, paths[2], chart_title)
    summary = dict(runs=runs, rows=[{**r, "summary": asdict(r["summary"])} for r in rows])
    summary.update(timings=timings, wall_time_s=time.perf_counter() - start)
    report.write_text(osp.join(out_dir, "runs.json"), json.dumps(summary, indent=1, default=str))
    if docs_prefix:
        for src, suffix in zip(paths, (".md", ".png", "_curves.png")):
            os.makedirs(osp.dirname(osp.abspath(docs_prefix)), exist_ok=True)
            shutil.copyfile(src, docs_prefix + suffix)
    return md, paths


def _timings(
    configs: dict[str, Config], rounds: int, out_dir: str, force: bool
) -> dict[str, list[float]]:
    """:func:`time_heads` of ``configs``, kept in ``<out_dir>/timing.json`` for the same heads
    and rounds (``force`` measures again)."""
    path = osp.join(out_dir, "timing.json")
    if not force and osp.isfile(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        if sorted(saved) == sorted(configs) and all(len(v) == rounds for v in saved.values()):
            return saved
    print(f"timing {len(configs)} heads in turn, {rounds} rounds ...", flush=True)
    timings = time_heads(configs, rounds)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(timings, f)
    return timings
