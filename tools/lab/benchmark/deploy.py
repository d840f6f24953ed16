"""CPU latency at equal threads, PyTorch eager vs ONNX Runtime fp32/fp16/int8/int8-dynamic, with
quality on the val split, ORT's per-operator profile, and the eval_draws trade-off
(docs/deploy.md)."""

from __future__ import annotations

import collections
import json
import os
import os.path as osp
import statistics
import tempfile
import time
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import torch

from hamseg.apis import init_model
from hamseg.apis.export import SegmentorLogits, export_onnx, onnx_session, seed_hams
from tools.deploy.int8 import HAM_SCOPE, Recipe, quantize_int8
from tools.deploy.precision import (
    calibration_inputs,
    compare,
    convert,
    predictions,
    val_batches,
    val_miou,
)

from .measure import alternate, machine
from .models import HAM, resolve

DEMO = "configs/demo/hamhead-nmf_r18-d8_context-shapes.py"
SEGNEXT = "configs/demo/hamlighthead-nmf_mscan-t_context-shapes.py"
#: --models: label, config, timed size, whether its val split is here (the demo data).
CASES = {
    "demo": ("demo HamHead-NMF", DEMO, 128, True),
    "segnext": ("SegNeXt-T (HamLightHead)", SEGNEXT, 512, True),
    "hamnet": ("HamNet R101-D8 (HamHead)", HAM, 513, False),
}
BACKENDS = ("eager fp32", "ORT fp32", "ORT fp16", "ORT int8", "ORT int8-dynamic")
#: --recipes: the shipped int8 recipe and one change of it each (docs/reports/).
RECIPES = {
    "shipped": Recipe(),
    "QDQ format": Recipe(qdq=True),
    "int8 activations": Recipe(activations="int8"),
    "per-tensor weights": Recipe(per_channel=False),
    "GELU not fused": Recipe(fuse_gelu=False),
    "depthwise > 3x3 in float": Recipe(depthwise=9),
    "depthwise in float": Recipe(depthwise=0),
    "Conv only": Recipe(op_types=("Conv",)),
}


def _median_row(times: Sequence[float], cpu: Sequence[float]) -> dict[str, float]:
    """Median, min and max ms of wall-clock ``times``; median ms of the ``cpu`` times."""
    wall = dict(ms=statistics.median(times), min_ms=min(times), max_ms=max(times))
    return {k: 1e3 * v for k, v in wall.items()} | dict(cpu_ms=1e3 * statistics.median(cpu))


def alternate_cpu(fns: dict[str, Any], runs: int) -> dict[str, tuple[list, list]]:
    """:func:`~.measure.alternate`'s wall-clock seconds and the process's CPU seconds of each
    call (all its threads; at 1 thread the computation's own time, which other processes on a
    loaded machine stretch far less than the wall clock)."""
    cpu: dict[str, list[float]] = {name: [] for name in fns}

    def timed(name: str, fn: Any) -> Any:
        def call() -> None:
            start = time.process_time()
            fn()
            cpu[name].append(time.process_time() - start)

        return call

    wall = alternate({name: timed(name, fn) for name, fn in fns.items()}, torch.device("cpu"), runs)
    return {name: (wall[name], cpu[name][1:]) for name in fns}  # [1:]: the warm-up


def _calibration(model: torch.nn.Module, size: int, val_images: int, quality: bool) -> tuple:
    """(val batches, int8 calibration inputs): the val split and :func:`calibration_inputs`,
    or without the data (``quality`` False) none and one random normal 1x3xSxS input (enough to
    time a graph, not to judge it; ORT's calibration holds every activation of every input)."""
    if quality:
        return list(val_batches(model, val_images)), calibration_inputs(model)[0]
    return [], [np.random.default_rng(0).normal(size=(1, 3, size, size)).astype(np.float32)]


def op_profile(path: str, x: np.ndarray, threads: int, runs: int = 3) -> list[dict[str, Any]]:
    """ORT's profiler over ``runs`` runs of the graph on ``x`` after one warm-up: each node's
    fastest run (what other processes did not stretch), summed per operator type with the ham's
    nodes apart: ms, node count and share of all nodes' time."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    with tempfile.TemporaryDirectory() as tmp:
        options.enable_profiling = True
        options.profile_file_prefix = osp.join(tmp, "p")
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        for _ in range(runs + 1):
            session.run(None, {"input": x})
        with open(session.end_profiling()) as f:
            events = json.load(f)
    warm_up = min((e for e in events if e["name"] == "model_run"), key=lambda e: e["ts"])
    fastest: dict[tuple[str, str], float] = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            if e["ts"] > warm_up["ts"] + warm_up["dur"]:
                key = (e["name"], e["args"]["op_name"])
                fastest[key] = min(fastest.get(key, np.inf), e["dur"])
    total = collections.Counter()
    nodes = collections.Counter()
    for (name, op), us in fastest.items():
        op += " (ham)" if HAM_SCOPE in name else ""
        total[op] += us
        nodes[op] += 1
    spent = sum(total.values()) or 1
    return [
        dict(op=op, ms=us / 1e3, nodes=nodes[op], share=us / spent)
        for op, us in total.most_common()
    ]


def latency(
    config: str,
    size: int,
    checkpoint: Optional[str],
    threads: list[int],
    runs: int = 10,
    val_images: int = 0,
    backends: Sequence[str] = BACKENDS,
    quality: bool = True,
    profile_runs: int = 0,
) -> dict[str, Any]:
    """Rows per backend and thread count: median ms of a 1x3xSxS inference over ``runs``
    alternating runs (torch.set_num_threads = ORT intra-op threads, inter-op 1), min/max, the
    ratio to eager and to ORT fp32 at the same threads and (with ``quality``) argmax agreement
    with fp32 and val mIoU; with ``profile_runs``, :func:`op_profile` of ORT fp32 and int8 at
    the first thread count."""
    model = init_model(resolve(config), checkpoint, "cpu")
    x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(0))
    result: dict[str, Any] = dict(rows=[], profiles={})
    saved = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        files = {"fp32": osp.join(tmp, "fp32.onnx")}
        exported = export_onnx(model, files["fp32"], (size, size), dynamic=True)
        batches, calibration = _calibration(model, size, val_images, quality)
        for b in backends:
            if b.startswith("ORT ") and b != "ORT fp32":
                files[b[4:]] = osp.join(tmp, f"{b[4:]}.onnx")
                convert(files["fp32"], files[b[4:]], b[4:], calibration)
        quality_of = {}
        if batches:
            reference = predictions(files["fp32"], batches)  # once for all
            quality_of = {p: compare(reference, f, p, batches) for p, f in files.items()}
        for n in threads:
            torch.set_num_threads(n)
            run = lambda s: lambda: s.run(None, {"input": x.numpy()})  # noqa: E731
            fns = {"eager fp32": lambda: exported(x)} if "eager fp32" in backends else {}
            fns |= {f"ORT {p}": run(onnx_session(f, n)) for p, f in files.items()}
            times = alternate_cpu(fns, runs)
            rows = {name: _median_row(*t) for name, t in times.items()}
            eager = rows.get("eager fp32", {})
            ort = rows["ORT fp32"]
            for name, row in rows.items():
                q = quality_of.get(name.split()[1])  # eager: the fp32 graph's (argmax equal)
                result["rows"].append(
                    dict(
                        backend=name,
                        threads=n,
                        **row,
                        ratio=row["ms"] / eager["ms"] if eager else None,
                        ratio_ort=row["ms"] / ort["ms"],
                        cpu_ratio_ort=row["cpu_ms"] / ort["cpu_ms"],
                        runs=runs,
                        size=size,
                        agreement=q and q.agreement,
                        worst=q and q.worst,
                        miou=q and q.miou,
                        val_images=len(batches),
                    )
                )
        torch.set_num_threads(saved)
        for p in ("fp32", "int8") if profile_runs else ():
            if p in files:
                result["profiles"][p] = op_profile(files[p], x.numpy(), threads[0], profile_runs)
    return result


def recipe_table(
    config: str,
    size: int,
    checkpoint: Optional[str],
    recipes: Sequence[str] = tuple(RECIPES),
    threads: int = 1,
    runs: int = 10,
    val_images: int = 0,
    quality: bool = True,
) -> list[dict[str, Any]]:
    """Per :data:`RECIPES` entry: the int8 graph's ms and CPU ms of a 1x3xSxS inference,
    alternating with ORT fp32 and every other recipe (``threads``), the ratios to ORT fp32 and
    (with ``quality``) agreement with fp32 and val mIoU."""
    model = init_model(resolve(config), checkpoint, "cpu")
    x = np.random.default_rng(0).normal(size=(1, 3, size, size)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        files = {"ORT fp32": osp.join(tmp, "fp32.onnx")}
        export_onnx(model, files["ORT fp32"], (size, size), dynamic=True)
        batches, calibration = _calibration(model, size, val_images, quality)
        for i, name in enumerate(recipes):
            files[name] = osp.join(tmp, f"{i}.onnx")
            quantize_int8(files["ORT fp32"], files[name], calibration, RECIPES[name])
        reference = predictions(files["ORT fp32"], batches) if batches else None
        fns = {}
        for name, f in files.items():
            session = onnx_session(f, threads)
            fns[name] = lambda s=session: s.run(None, {"input": x})
        saved = torch.get_num_threads()
        torch.set_num_threads(threads)
        times = alternate_cpu(fns, runs)
        torch.set_num_threads(saved)
        rows = {name: _median_row(*t) for name, t in times.items()}
        out = []
        for name, row in rows.items():
            q = compare(reference, files[name], name, batches) if batches else None
            out.append(
                dict(
                    recipe=name,
                    **row,
                    ratio_ort=row["ms"] / rows["ORT fp32"]["ms"],
                    cpu_ratio_ort=row["cpu_ms"] / rows["ORT fp32"]["cpu_ms"],
                    agreement=q and q.agreement,
                    worst=q and q.worst,
                    miou=q and q.miou,
                    size=size,
                    threads=threads,
                    runs=runs,
                )
            )
    return out


def _eager_miou(model: torch.nn.Module, batches: list, seed: int) -> float:
    """Val mIoU of ``model`` in PyTorch with every ham seeded by ``seed``."""
    seed_hams(model, seed)
    logits = SegmentorLogits(model).eval()
    with torch.no_grad():
        preds = [logits(torch.from_numpy(x))[0].argmax(0).numpy() for x, _ in batches]
    return val_miou(preds, batches, model.decode_head.num_classes)


def draws_table(
    config: str,
    size: int,
    checkpoint: Optional[str],
    draws: Sequence[int] = (1, 4, 12),
    seeds: int = 10,
    threads: int = 1,
    runs: int = 10,
    val_images: int = 0,
) -> list[dict[str, Any]]:
    """Per ``eval_draws``: ORT fp32 and int8 ms of a 1x3xSxS inference (all graphs alternating,
    ``threads``), the graph's val mIoU (eval_seed 0, as exported) and the val mIoU over
    eval_seed 0..``seeds``-1 in PyTorch (mean, min, max: what another seed would give)."""
    rows = []
    fns = {}
    x = np.random.default_rng(0).normal(size=(1, 3, size, size)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        for k in draws:
            options = {"model.decode_head.ham_cfg.eval_draws": k}
            model = init_model(resolve(config), checkpoint, "cpu", cfg_options=options)
            fp32, int8 = (osp.join(tmp, f"{p}{k}.onnx") for p in ("fp32", "int8"))
            export_onnx(model, fp32, (size, size), dynamic=True)
            batches, calibration = _calibration(model, size, val_images, True)
            convert(fp32, int8, "int8", calibration)
            mious = [_eager_miou(model, batches, seed) for seed in range(seeds)]
            classes = model.decode_head.num_classes
            graph = val_miou(predictions(fp32, batches), batches, classes)
            int8_miou = val_miou(predictions(int8, batches), batches, classes)
            for p, f in (("fp32", fp32), ("int8", int8)):
                session = onnx_session(f, threads)
                fns[f"{p} {k}"] = lambda s=session: s.run(None, {"input": x})
            rows.append(
                dict(
                    draws=k,
                    miou=graph,
                    miou_int8=int8_miou,
                    miou_mean=statistics.mean(mious),
                    miou_min=min(mious),
                    miou_max=max(mious),
                    seeds=seeds,
                    val_images=len(batches),
                    size=size,
                    threads=threads,
                    runs=runs,
                )
            )
        saved = torch.get_num_threads()
        torch.set_num_threads(threads)
        times = alternate_cpu(fns, runs)
        torch.set_num_threads(saved)
    for row in rows:
        for p in ("fp32", "int8"):
            row |= {f"{p}_{k}": v for k, v in _median_row(*times[f"{p} {row['draws']}"]).items()}
    return rows


def environment() -> dict[str, Any]:
    """What a latency number depends on: the machine, its load average, ORT's version."""
    import onnxruntime

    return dict(machine(), load=os.getloadavg(), onnxruntime=onnxruntime.__version__)
