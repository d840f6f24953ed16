"""Time a whole segmentor, inference or one training iteration, alone or paired against a second
model (another config, or the same with other --cfg-options), A and B interleaved in one process::

    python tools/analysis_tools/benchmark_model.py CONFIG [--vs CONFIG_B] [--mode infer|train]
        [--size 512] [--batch 1] [--pairs 9] [--threads 1] [--cfg-options ...]
        [--vs-options ...] [--out result.json]

Each pair runs A and B once (alternating which goes first) on synthetic uint8 images; the JSON
gives per-call medians of wall and thread CPU time (the CPU time of the calling thread is what
other processes on a loaded machine stretch least; with --threads 1 it is all the work) and the
median ratio A / B with its min and max over the pairs. No pretrained weights are loaded.
"""

import argparse
import copy
import json
import statistics
import time

import torch
from mmengine.config import Config, DictAction
from mmengine.model import revert_sync_batchnorm
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample

import hamseg  # noqa: F401  (registers hamseg and adapts the stack)
from hamseg.cli import run_cli
from hamseg.utils.errors import UsageError


def build(config: str, options: dict | None, mode: str, batch: int, size: tuple[int, int]):
    """A call running the model of ``config`` once in ``mode`` on a fixed synthetic batch."""
    cfg = Config.fromfile(config)
    if options:
        cfg.merge_from_dict(options)
    init_default_scope(cfg.get("default_scope", "mmseg"))
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.pretrained = None
    model_cfg.backbone.init_cfg = None
    torch.manual_seed(0)
    model = revert_sync_batchnorm(MODELS.build(model_cfg))
    model.init_weights()
    gen = torch.Generator().manual_seed(0)
    classes = model.decode_head.num_classes
    meta = dict(img_shape=size, ori_shape=size, pad_shape=size)
    inputs = [torch.randint(0, 256, (3, *size), dtype=torch.uint8, generator=gen)] * batch
    label = PixelData(data=torch.randint(0, classes, (1, *size), generator=gen))
    data = dict(
        inputs=inputs, data_samples=[SegDataSample(gt_sem_seg=label, metainfo=meta)] * batch
    )
    if mode == "train":
        model.train()
        optim = build_optim_wrapper(model, cfg.optim_wrapper)
        return lambda: model.train_step(data, optim)
    model.eval()

    def infer() -> None:
        with torch.no_grad():
            model.test_step(data)

    return infer


def timed(call) -> tuple[float, float]:
    """(wall, thread CPU) milliseconds of one call."""
    wall, cpu = time.perf_counter(), time.thread_time()
    call()
    return 1e3 * (time.perf_counter() - wall), 1e3 * (time.thread_time() - cpu)


def summary(values: list[float]) -> dict:
    return dict(median=statistics.median(values), min=min(values), max=max(values))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("config")
    p.add_argument("--vs", help="model B's config (default: CONFIG with --vs-options)")
    p.add_argument("--mode", choices=("infer", "train"), default="infer")
    p.add_argument("--size", type=int, nargs="+", default=[512], help="H [W] of the images")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--pairs", type=int, default=9, help="timed calls of each model")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--cfg-options", nargs="+", action=DictAction, help="for model A")
    p.add_argument("--vs-options", nargs="+", action=DictAction, help="for model B")
    p.add_argument("--out", help="also write the JSON here")
    args = p.parse_args()
    if min(args.size) < 1 or len(args.size) > 2 or args.batch < 1 or args.pairs < 1:
        raise UsageError("--size takes H [W] >= 1; --batch and --pairs must be >= 1")
    torch.set_num_threads(args.threads)
    size = (args.size[0], args.size[-1])
    calls = {"A": build(args.config, args.cfg_options, args.mode, args.batch, size)}
    if args.vs or args.vs_options:
        vs = args.vs or args.config
        calls["B"] = build(vs, args.vs_options, args.mode, args.batch, size)
    for _ in range(args.warmup):
        for call in calls.values():
            call()
    runs = {name: [] for name in calls}
    for i in range(args.pairs):
        for name in sorted(calls, reverse=bool(i % 2)):  # A B, B A, ...
            runs[name].append(timed(calls[name]))
    result = dict(vars(args), size=size, torch=torch.__version__)
    for name, times in runs.items():
        result[name] = dict(
            wall_ms=summary([w for w, _ in times]), cpu_ms=summary([c for _, c in times])
        )
    if "B" in runs:
        for i, clock in enumerate(("wall", "cpu")):
            ratios = [a[i] / b[i] for a, b in zip(runs["A"], runs["B"])]
            result[f"ratio_{clock}"] = summary(ratios)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    run_cli(main)
