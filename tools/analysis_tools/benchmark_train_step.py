"""One training iteration of a config on synthetic data (docs/gpu.md), JSON out: the eager step,
the device-busy time under torch.profiler (the floor a step can reach: the rest is the CPU
launching ~2,000 kernels) and the whole step compiled with torch.compile(mode="reduce-overhead")
(CUDA graphs); --dry-run (CPU): 2 iterations, batch 1 at 64^2, nothing compiled.

    python tools/analysis_tools/benchmark_train_step.py configs/ham_voc.py --out step.json
    python tools/analysis_tools/benchmark_train_step.py configs/ham_voc.py --dry-run --out s.json
"""

import argparse
import json
import statistics
import time

import torch
from mmengine.config import Config
from mmengine.model import revert_sync_batchnorm
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample

import hamseg  # noqa: F401  (registers hamseg's modules in mmseg's registries)


def build(config: str, size: int, device: str):
    """The config's model (train mode, random weights, SyncBN as BN) and optimizer wrapper."""
    cfg = Config.fromfile(config)
    init_default_scope(cfg.get("default_scope", "mmseg"))
    cfg.model.pop("pretrained", None)
    cfg.model.backbone.init_cfg = None
    if cfg.model.data_preprocessor.get("size"):
        cfg.model.data_preprocessor.size = (size, size)
    torch.manual_seed(0)
    model = revert_sync_batchnorm(MODELS.build(cfg.model)).to(device).train()
    return model, build_optim_wrapper(model, cfg.optim_wrapper), cfg


def synthetic(batch: int, size: int, classes: int) -> dict:
    """What the loader yields after PackSegInputs: uint8 images, labels with 5% ignored."""
    g = torch.Generator().manual_seed(0)
    inputs = [
        torch.randint(0, 256, (3, size, size), dtype=torch.uint8, generator=g) for _ in range(batch)
    ]
    samples = []
    for _ in range(batch):
        label = torch.randint(0, classes, (1, size, size), generator=g)
        label[torch.rand(label.shape, generator=g) < 0.05] = 255
        meta = dict(img_shape=(size, size), ori_shape=(size, size), pad_shape=(size, size))
        samples.append(SegDataSample(gt_sem_seg=PixelData(data=label), metainfo=meta))
    return dict(inputs=inputs, data_samples=samples)


def timed(step, iters: int, device: str) -> list[float]:
    """Milliseconds of ``iters`` calls, synchronised."""
    sync, out = torch.cuda.synchronize if device == "cuda" else lambda: None, []
    for _ in range(iters):
        sync()
        start = time.perf_counter()
        step()
        sync()
        out.append(1e3 * (time.perf_counter() - start))
    return out


def busy_ms(step, iters: int, device: str) -> float:
    """Kernel time per step (device time; CPU: the operators' own CPU time)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        timed(step, iters, device)
    attr = "self_device_time_total" if cuda else "self_cpu_time_total"  # microseconds
    ops = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    return sum(getattr(e, attr) for e in ops) / iters / 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("config")
    p.add_argument("--batch", type=int, default=2, help="images per GPU (the recipe's)")
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--out", required=True, help="JSON file")
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() and not args.dry_run else "cpu"
    if args.dry_run:
        args.batch, args.size, args.iters = 1, 64, 2
    model, wrapper, cfg = build(args.config, args.size, device)
    data = synthetic(args.batch, args.size, model.decode_head.num_classes)
    step = lambda: model.train_step(data, wrapper)
    warmup = 1 if args.dry_run else 3
    timed(step, warmup, device)
    result = dict(
        config=args.config, device=torch.cuda.get_device_name() if device == "cuda" else "cpu"
    )
    result.update(torch=torch.__version__, batch=args.batch, size=args.size, iters=args.iters)
    result["eager_ms"] = timed(step, args.iters, device)
    result["busy_ms"] = busy_ms(step, min(args.iters, 5), device)
    try:
        compiled = torch.compile(step, mode="reduce-overhead", disable=args.dry_run)
        start = time.perf_counter()
        timed(compiled, warmup, device)
        result["compile_s"] = time.perf_counter() - start
        result["compiled_ms"] = timed(compiled, args.iters, device)
    except Exception as err:  # noqa: BLE001  (recorded: the other numbers stand)
        result["compile_error"] = " ".join(repr(err).split())[:500]
    for key in ("eager_ms", "compiled_ms"):
        if key in result:
            result[key.replace("_ms", "_median_ms")] = statistics.median(result[key])
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if not isinstance(v, list)}, indent=1))


if __name__ == "__main__":
    main()
