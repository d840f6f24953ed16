"""Time one real training iteration of a recipe at full size and report its peak memory.

Usage::

    python tools/benchmark_train_iter.py                        # configs/ham_voc.py, 2 x 513x513
    python tools/benchmark_train_iter.py configs/ham_voc.py --batch-size 2 --size 513 --iters 2

The model of the config is built as tools/train.py builds it for one process (pretrained init
off, SyncBN reverted to BN as mmengine does without a process group), with the config's optimizer
and parameter groups. Each iteration is ``model.train_step`` on a synthetic batch (random uint8
images and labels, 5% ignore pixels): data preprocessing, forward, loss, backward and the SGD
update. Reported: seconds per iteration, peak resident memory of the process (``ru_maxrss``) and
the resident memory before the first iteration, as a table and optionally as JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import os.path as osp
import resource
import sys
import time
from collections.abc import Sequence
from typing import Optional

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
import torch  # noqa: E402
from mmengine.config import Config  # noqa: E402
from mmengine.logging import MMLogger  # noqa: E402
from mmengine.model import revert_sync_batchnorm  # noqa: E402
from mmengine.optim import build_optim_wrapper  # noqa: E402
from mmengine.registry import init_default_scope  # noqa: E402
from mmengine.structures import PixelData  # noqa: E402
from mmseg.registry import MODELS  # noqa: E402
from mmseg.structures import SegDataSample  # noqa: E402

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))


def current_rss_mib() -> float:
    """Resident memory of this process now (Linux /proc), MiB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far (``ru_maxrss`` is in KiB on Linux), MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synthetic_batch(batch: int, size: int, num_classes: int, seed: int = 0) -> dict:
    """What the data loader yields after PackSegInputs: uint8 BGR images, labels with 255s."""
    gen = torch.Generator().manual_seed(seed)
    inputs, samples = [], []
    for _ in range(batch):
        inputs.append(torch.randint(0, 256, (3, size, size), dtype=torch.uint8, generator=gen))
        label = torch.randint(0, num_classes, (1, size, size), generator=gen)
        label[torch.rand(label.shape, generator=gen) < 0.05] = 255
        meta = dict(img_shape=(size, size), ori_shape=(size, size), pad_shape=(size, size))
        samples.append(SegDataSample(gt_sem_seg=PixelData(data=label), metainfo=meta))
    return dict(inputs=inputs, data_samples=samples)


def benchmark(config: str, batch_size: Optional[int], size: int, iters: int) -> dict:
    """Run ``iters`` training iterations; returns the measurements (see the module docstring)."""
    cfg = Config.fromfile(config)
    init_default_scope(cfg.get("default_scope", "mmseg"))
    cfg.model.backbone.init_cfg = None
    if cfg.model.data_preprocessor.get("size"):  # else a smaller --size is padded to the crop
        cfg.model.data_preprocessor.size = (size, size)
    batch = batch_size or cfg.train_dataloader.batch_size
    torch.manual_seed(0)
    model = revert_sync_batchnorm(MODELS.build(cfg.model))
    model.train()
    optim_wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    data = synthetic_batch(batch, size, model.decode_head.num_classes)
    rss_before = current_rss_mib()
    times, losses = [], []
    for _ in range(iters):
        start = time.perf_counter()
        log_vars = model.train_step(data, optim_wrapper)
        times.append(time.perf_counter() - start)
        losses.append(log_vars["loss"].item())
    return dict(
        config=osp.relpath(osp.abspath(config), REPO),
        batch_size=batch,
        size=size,
        iters=iters,
        seconds_per_iter=times,
        loss=losses,
        rss_before_mib=round(rss_before, 1),
        peak_rss_mib=round(peak_rss_mib(), 1),
        threads=torch.get_num_threads(),
        torch=torch.__version__,
        params_m=round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
    )


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Time one full-size training iteration")
    parser.add_argument("config", nargs="?", default=osp.join(REPO, "configs", "ham_voc.py"))
    parser.add_argument("--batch-size", type=int, help="images per iteration (config's default)")
    parser.add_argument("--size", type=int, default=513, help="square crop size")
    parser.add_argument("--iters", type=int, default=1, help="iterations to time")
    parser.add_argument("--threads", type=int, help="torch intra-op threads")
    parser.add_argument("--out", help="also write the result as JSON here")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    # quiet: mmengine logs one line per parameter group option at INFO
    MMLogger.get_instance("benchmark_train_iter", log_level="WARNING")
    if args.threads:
        torch.set_num_threads(args.threads)
    result = benchmark(args.config, args.batch_size, args.size, args.iters)
    rows = [
        ("config", result["config"]),
        ("batch x size", f"{result['batch_size']} x {result['size']}x{result['size']}"),
        ("parameters", f"{result['params_m']} M"),
        ("seconds / iteration", ", ".join(f"{t:.1f}" for t in result["seconds_per_iter"])),
        ("loss", ", ".join(f"{v:.4f}" for v in result["loss"])),
        ("RSS before / peak", f"{result['rss_before_mib']:.0f} / {result['peak_rss_mib']:.0f} MiB"),
        ("threads, torch", f"{result['threads']}, {result['torch']}"),
    ]
    for key, value in rows:
        print(f"{key:<22} {value}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
