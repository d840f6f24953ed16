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
over ``--iters`` after ``--warmup`` (on CUDA timed with CUDA events), the peak memory of one
iteration (as in ``tools/benchmark_context.py``: the CPU allocator's events under
``torch.profiler``, or the CUDA allocator's peak), the CPU other processes used while the
iterations were timed (cores), and the time ratio of every model to the first one. By default
mmseg's NonLocal model is measured twice: as configured (with its auxiliary FCN head) and with
the auxiliary head removed, HamNet having none. The logic lives in :mod:`hamseg.benchmark.model`.
"""

from __future__ import annotations

import argparse
import os
import os.path as osp
import sys
from typing import Optional

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from mmengine.logging import MMLogger  # noqa: E402

from hamseg.benchmark.machine import select_device  # noqa: E402
from hamseg.benchmark.model import HAM, NONLOCAL, IterSettings, model_markdown, run_models  # noqa: E402
from hamseg.benchmark.outputs import write_report  # noqa: E402
from hamseg.benchmark.training import resolve  # noqa: E402
from hamseg.cli import run_cli  # noqa: E402
from hamseg.compat.package_lookup import config_file  # noqa: E402


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


def main(argv: Optional[list[str]] = None) -> None:
    args = parse_args(argv)
    for config in args.configs:  # all of them before the first is measured
        config_file(resolve(config))
    MMLogger.get_instance("benchmark_model", log_level="WARNING")
    device = select_device(args.device, args.threads)
    os.makedirs(args.out_dir, exist_ok=True)  # fail before measuring, not after
    st = IterSettings(
        args.size,
        device,
        args.batch,
        args.iters,
        args.warmup,
        memory=not args.no_memory,
        quiet_cpu=args.quiet_cpu,
        max_wait=args.max_wait,
    )
    result = run_models(args.configs, st, args.labels, aux_variant=not args.no_aux_variant)
    base = osp.join(args.out_dir, args.name)
    text = model_markdown(result)
    files = write_report(base, text, result)
    print(text)
    print(f"[benchmark_model] wrote {', '.join(files)}")


if __name__ == "__main__":
    run_cli(main)
