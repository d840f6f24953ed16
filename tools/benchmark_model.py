"""One training iteration of whole segmentation models, side by side: HamNet vs NonLocal.

Usage::

    # configs/ham_voc.py (ResNet-101 OS8 + HamHead) vs mmseg's NonLocal R101-D8, 1x3x129x129
    python tools/benchmark_model.py --out-dir docs
    python tools/benchmark_model.py --size 257 --iters 5

Each config is built as tools/train.py builds it for one process: pretrained weights off
(backbone ``init_cfg`` / ``pretrained`` None), SyncBN reverted to BN, the data preprocessor's
pad size set to the input size, the config's own optimizer and parameter groups. An iteration is
``model.train_step`` on one synthetic batch (random uint8 images, random labels with 5% ignore
pixels): preprocessing, forward, losses (auxiliary heads included when the config has them),
backward and the optimizer step. Reported per model: parameters, median seconds per iteration
over ``--iters`` after ``--warmup``, the peak memory of one iteration (as in
``tools/benchmark_context.py``: the CPU allocator's events under ``torch.profiler``, or the CUDA
allocator's peak), the CPU other processes used while the iterations were timed (cores), and
the time ratio of every model to the first one. By default mmseg's
NonLocal model is measured twice: as configured (with its auxiliary FCN head) and with the
auxiliary head removed, HamNet having none.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import os.path as osp
import statistics
import sys
import time
from typing import Any, Optional

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout
sys.path.insert(0, osp.dirname(osp.abspath(__file__)))  # benchmark_context/_train_iter helpers

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
import mmseg  # noqa: E402
import torch  # noqa: E402
from benchmark_context import OtherCPU, load, peak_memory, wait_for_quiet  # noqa: E402
from benchmark_train_iter import synthetic_batch  # noqa: E402
from mmengine.config import Config  # noqa: E402
from mmengine.logging import MMLogger  # noqa: E402
from mmengine.model import revert_sync_batchnorm  # noqa: E402
from mmengine.optim import build_optim_wrapper  # noqa: E402
from mmengine.registry import init_default_scope  # noqa: E402
from mmseg.registry import MODELS  # noqa: E402

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
HAM = "configs/ham_voc.py"
NONLOCAL = "mmseg::nonlocal_net/nonlocal_r101-d8_4xb4-40k_voc12aug-512x512.py"


def resolve(config: str) -> str:
    """Path of a config; ``mmseg::x`` is mmseg's packaged config ``x``."""
    if config.startswith("mmseg::"):
        return osp.join(osp.dirname(mmseg.__file__), ".mim", "configs", config[len("mmseg::") :])
    return config if osp.isabs(config) else osp.join(REPO, config)


def build(config: str, size: int, no_aux: bool, device: torch.device) -> tuple[Any, Any, Config]:
    """Model and optim wrapper of a config, for one process, without pretrained weights."""
    cfg = Config.fromfile(resolve(config))
    init_default_scope(cfg.get("default_scope", "mmseg"))
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.pretrained = None
    model_cfg.backbone.init_cfg = None
    model_cfg.data_preprocessor.size = (size, size)
    if no_aux:
        model_cfg.pop("auxiliary_head", None)
    torch.manual_seed(0)
    model = revert_sync_batchnorm(MODELS.build(model_cfg)).to(device)
    model.init_weights()
    model.train()
    return model, build_optim_wrapper(model, cfg.optim_wrapper), cfg


def measure(
    config: str, label: str, args: argparse.Namespace, device: torch.device, no_aux: bool = False
) -> dict[str, Any]:
    """Time and peak memory of training iterations of one model."""
    model, optim_wrapper, _ = build(config, args.size, no_aux, device)
    data = synthetic_batch(args.batch, args.size, model.decode_head.num_classes)
    row: dict[str, Any] = dict(
        label=label,
        config=config,
        aux_head=getattr(model, "with_auxiliary_head", False),
        params=sum(p.numel() for p in model.parameters()),
        load_before=load(),
    )

    def step() -> None:
        model.train_step(data, optim_wrapper)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(args.warmup):
        step()
    if args.max_wait > 0:
        wait_for_quiet(args.quiet_cpu, args.max_wait)
    times = []
    with OtherCPU() as other:
        for _ in range(args.iters):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
    row["iter_s"] = statistics.median(times)
    row["iter_s_all"] = times
    row["other_cpu"] = other.cores
    if not args.no_memory:
        row["peak_mem_mb"] = peak_memory(step, device) / 2**20
    row["load_after"] = load()
    return row


def markdown(result: dict[str, Any]) -> str:
    env, rows = result["env"], result["rows"]
    lines = [
        f"One training iteration (train_step: forward, loss, backward, optimizer step), input "
        f"{env['batch']}x3x{env['size']}x{env['size']}, {env['device']}, {env['threads']} "
        f"threads, median of {env['iters']} after {env['warmup']} warm-up; load (1-min) "
        f"{env['load_start']} at start, {env['load_end']} at end.",
        "",
        "| Model | Config | Aux head | Params (M) | s / iter | x first | Peak mem (MiB) | "
        "Others' CPU | load |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    first = rows[0]["iter_s"]
    for r in rows:
        mem = f"{r['peak_mem_mb']:.0f}" if "peak_mem_mb" in r else "-"
        lines.append(
            f"| {r['label']} | `{r['config']}` | {'yes' if r['aux_head'] else 'no'} | "
            f"{r['params'] / 1e6:.2f} | {r['iter_s']:.2f} | {r['iter_s'] / first:.2f} | {mem} | "
            f"{r['other_cpu']} | {r['load_before']} |"
        )
    return "\n".join(lines) + "\n"


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--configs",
        nargs="+",
        default=[HAM, NONLOCAL],
        help="configs to compare; ratios are relative to the first",
    )
    p.add_argument("--labels", nargs="+", default=None)
    p.add_argument(
        "--no-aux-variant",
        action="store_true",
        help="do not add the 'without auxiliary head' variant of configs that have one",
    )
    p.add_argument("--size", type=int, default=129)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--quiet-cpu", type=float, default=0.3, help="see benchmark_context.py")
    p.add_argument(
        "--max-wait",
        type=float,
        default=0.0,
        help="seconds to wait, before timing a model, for other processes to go quiet",
    )
    p.add_argument("--out-dir", default="docs")
    p.add_argument("--name", default="benchmark_model")
    return p.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    args = parse_args(argv)
    MMLogger.get_instance("benchmark_model", log_level="WARNING")
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    labels = args.labels or [
        "HamNet (HamHead NMF)" if c == HAM else osp.splitext(osp.basename(c))[0]
        for c in args.configs
    ]
    env = dict(
        size=args.size,
        batch=args.batch,
        iters=args.iters,
        warmup=args.warmup,
        device=str(device),
        threads=torch.get_num_threads(),
        torch=torch.__version__,
        load_start=load(),
    )
    rows = []
    for config, label in zip(args.configs, labels):
        print(f"[benchmark_model] {label} (load {load()}) ...", flush=True)
        rows.append(measure(config, label, args, device))
        if rows[-1]["aux_head"] and not args.no_aux_variant:
            print(f"[benchmark_model] {label} without auxiliary head ...", flush=True)
            rows.append(measure(config, f"{label} (no aux head)", args, device, no_aux=True))
    env["load_end"] = load()
    for r in rows:
        r["ratio_to_first"] = r["iter_s"] / rows[0]["iter_s"]
    result = dict(env=env, rows=rows)
    os.makedirs(args.out_dir, exist_ok=True)
    base = osp.join(args.out_dir, args.name)
    text = markdown(result)
    with open(base + ".md", "w") as f:
        f.write(text)
    with open(base + ".json", "w") as f:
        json.dump(result, f, indent=1)
    print(text)
    print(f"[benchmark_model] wrote {base}.md, {base}.json")
    return result


if __name__ == "__main__":
    main()
