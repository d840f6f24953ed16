"""Where the recipe's GPU time goes, every switch side by side in one process (docs/gpu.md)::

python tools/benchmark_gpu.py --device cuda --out-dir work_dirs/gpu_check/gpu
python tools/benchmark_gpu.py --device cuda --parts compile --out-dir work_dirs/gpu_check/compile

Parts: ``iterations`` (configs/ham_voc.py's train_step at batch 2 x 513^2 in fp32/fp16/bf16,
before [gpu] and as shipped: :func:`iteration_variants`; two rounds), ``profile``
(torch.profiler top operators), ``hamburger`` (the block at Table 3's 1x512x128x128 against
mmseg's, the evaluation draws, the block's fwd+bwd at HamHead's size), ``msflip`` (the 12-view
test per image with 1 and 12 draws), ``compile`` (torch.compile of train_step as mmengine's
``compile=True``, and of the block). Each part writes its JSON as soon as it is done.
"""

import argparse
import json
import os
import os.path as osp
import sys
import time
import traceback
from collections.abc import Callable

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
import torch  # noqa: E402
from mmengine.logging import MMLogger  # noqa: E402

from hamseg.cli import run_cli  # noqa: E402
from tools.lab.benchmark import gpu_perf as G  # noqa: E402
from tools.lab.benchmark.measure import machine, select_device  # noqa: E402
from tools.lab.benchmark.models import REPO  # noqa: E402

PARTS = ("iterations", "profile", "hamburger", "msflip", "compile")


def iteration_variants(precisions: list[str]) -> list[G.Switches]:
    """Before [gpu] (the old harness without cuDNN's autotuner, PointwiseConv on CUDA too) in
    each precision; as shipped (NCHW fp32, and channels_last as ChannelsLastHook runs it, bf16
    without a loss scaler as ``--amp-dtype bfloat16``); fused SGD as a candidate."""
    S = G.Switches
    before = [S(p, cudnn_benchmark=False, pointwise=True, fused=True) for p in precisions]
    shipped = [S("fp32")] if "fp32" in precisions else []
    shipped += [S(p, channels_last=True, loss_scale=p != "bf16") for p in precisions]
    if "bf16" in precisions:
        shipped.append(S("bf16", channels_last=True, loss_scale=False, fused_sgd=True))
    return before + shipped


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add = p.add_argument
    add("--config", default=osp.join(REPO, "configs", "ham_voc.py"))
    add("--device", default="cuda")
    add("--threads", type=int, default=2, help="torch intra-op threads on the CPU")
    add("--batch", type=int, default=2, help="images per iteration (the recipe's per GPU)")
    add("--size", type=int, default=513, help="square crop")
    add("--iters", type=int, default=8, help="timed iterations per variant and round")
    add("--rounds", type=int, default=2)
    add("--precisions", nargs="+", choices=list(G.PRECISIONS), default=list(G.PRECISIONS))
    add("--shape", type=int, nargs=4, default=[1, 512, 128, 128], help="the block's input")
    add("--head-shape", type=int, nargs=4, default=[2, 512, 65, 65], help="HamHead's size")
    add("--image", type=int, nargs=2, default=[375, 500], help="MS+flip test image H W")
    add("--runs", type=int, default=30, help="alternating runs of the block's rows")
    add("--parts", nargs="+", choices=PARTS, default=[p for p in PARTS if p != "compile"])
    add("--out-dir", default="work_dirs/gpu_perf")
    args = p.parse_args(argv)
    device = select_device(args.device, args.threads)
    os.makedirs(args.out_dir, exist_ok=True)
    MMLogger.get_instance("benchmark_gpu", log_level="WARNING")
    settings = {k: v for k, v in vars(args).items() if k != "parts"}

    def save(part: str, rows: object, began: float) -> None:
        result = dict(part=part, settings=settings, machine=machine(), rows=rows)
        result["seconds"] = round(time.perf_counter() - began, 1)
        with open(osp.join(args.out_dir, f"{part}.json"), "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1, default=str)
        print(f"[benchmark_gpu] {part} done in {result['seconds']} s", flush=True)

    bench = None
    if {"iterations", "profile", "compile"} & set(args.parts):
        bench = G.IterationBench(args.config, args.batch, args.size, device)
    failed = []
    for part in args.parts:
        began = time.perf_counter()
        try:
            rows = run_part(
                part,
                args,
                bench,
                device,
                lambda rows, part=part, began=began: save(part, rows, began),
            )
        except Exception as err:  # the other parts still run; the exit code says it failed
            traceback.print_exc()
            failed.append(part)
            rows = dict(error=" ".join(repr(err).split())[:2000])
        save(part, rows, began)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if failed:
        raise SystemExit(
            f"benchmark_gpu: parts {', '.join(failed)} failed (their JSON has the error)"
        )


def run_part(
    part: str,
    args: argparse.Namespace,
    bench: G.IterationBench | None,
    device: torch.device,
    save: Callable[[object], None],
) -> object:
    """The rows of one part; ``save(rows)`` writes what a long part has so far."""
    if part == "iterations":
        variants = iteration_variants(args.precisions)
        return G.iteration_rows(bench, variants, args.iters, rounds=args.rounds)
    if part == "profile":
        variants = [G.Switches(p) for p in args.precisions]
        variants += [v for v in iteration_variants(args.precisions) if v.channels_last]
        return [G.profile_iteration(bench, v) for v in variants]
    if part == "hamburger":
        shape = tuple(args.shape)
        head = tuple(args.head_shape)
        return dict(
            inference=G.hamburger_inference_rows(shape, device, runs=args.runs),
            draws_table3=G.draw_rows(shape, device, runs=args.runs),
            draws_head=G.draw_rows((1, *head[1:]), device, runs=args.runs),
            train_head=G.hamburger_train_rows(head, device, runs=args.runs),
        )
    if part == "msflip":
        variants = (G.Switches(), G.Switches(channels_last=True))
        return G.msflip_rows(args.config, device, tuple(args.image), variants=variants)
    # compile: the block first (seconds), then the recipe (minutes)
    rows: dict[str, list] = dict(hamburger=G.compiled_hamburger_rows(tuple(args.shape), device))
    save(rows)
    rows["train_step"] = []
    for v in (G.Switches("fp32"), G.Switches(args.precisions[-1], channels_last=True)):
        rows["train_step"] += G.compile_rows(bench, [v], args.iters)
        save(rows)
    return rows


if __name__ == "__main__":
    run_cli(main)
