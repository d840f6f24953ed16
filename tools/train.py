"""Train a segmentor with hamseg: mmseg 1.x's command line, on GPUs or CPU.

Every run also gets hamseg's guard hooks (unless the config configures them itself): a signal
(SIGTERM, SIGUSR1, Ctrl-C) checkpoints the current iteration and exits with code 75 (requeueing a
slurm job on SIGUSR1; a second Ctrl-C aborts at once), a non-finite loss stops with code 65
before it is saved, and checkpoints carry every rank's random state for an exact resume.
See docs/robustness.md.

Examples:
    python tools/train.py configs/ham_voc.py
    python tools/train.py configs/ham_voc.py --resume            # latest checkpoint in work_dir
    python tools/train.py configs/ham_voc.py --resume WORK_DIR/iter_4000.pth
    torchrun --nproc_per_node 8 tools/train.py configs/ham_voc.py --launcher pytorch
"""

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack, registers hamseg; before mmseg is used)

# isort: split
from mmengine.config import DictAction  # noqa: E402
from mmengine.logging import print_log  # noqa: E402
from mmengine.runner import Runner  # noqa: E402
from mmseg.registry import RUNNERS  # noqa: E402

from hamseg.cli import LAUNCHERS, add_guard_hooks, build_config, enable_amp, run_cli  # noqa: E402
from hamseg.cli.batch_check import check_total_batch, launch_world_size  # noqa: E402
from hamseg.cli.preflight import check_schedule, naming_validate_dataset, scan_data  # noqa: E402
from hamseg.cli.resume import (  # noqa: E402
    apply_resume,
    check_resumed_schedule,
    finished_run,
    report_load_from,
)
from hamseg.datasets.checks import check_dataset_paths  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Train a segmentor")
    parser.add_argument("config", help="train config file path")
    parser.add_argument("--work-dir", help="the dir to save logs and models")
    parser.add_argument(
        "--resume",
        nargs="?",
        const="auto",
        default=None,
        help="resume from a checkpoint path, or (no value) from the latest one in the work_dir; "
        "without one, a new run (from load_from's weights if the config sets it)",
    )
    parser.add_argument(
        "--amp", action="store_true", help="mixed precision (fp16 on GPU, bf16 autocast on CPU)"
    )
    parser.add_argument(
        "--amp-dtype",
        choices=("float16", "bfloat16"),
        help="--amp with this dtype (bfloat16: no loss scaler; the faster one on an H200)",
    )
    parser.add_argument(
        "--cfg-options", nargs="+", action=DictAction, help="override config keys: key=value"
    )
    parser.add_argument(
        "--skip-data-check", action="store_true", help="no scan of every sample before training"
    )
    parser.add_argument(
        "--allow-schedule-mismatch",
        action="store_true",
        help="train although --cfg-options leave the last scheduler ending before/after "
        "train_cfg.max_iters",
    )
    parser.add_argument(
        "--extend-schedule",
        action="store_true",
        help="--resume a checkpoint trained with other scheduler ends: rebuild this config's "
        "schedulers at its iteration (else refused)",
    )
    parser.add_argument(
        "--auto-scale-lr",
        action="store_true",
        help="another total batch than the recipe's: lr x total / auto_scale_lr.base_batch_size",
    )
    parser.add_argument(
        "--allow-batch-mismatch",
        action="store_true",
        help="train at another total batch than the recipe's with the recipe's lr",
    )
    parser.add_argument("--launcher", choices=LAUNCHERS, default="none", help="job launcher")
    parser.add_argument("--local_rank", "--local-rank", type=int, default=0)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    cfg = build_config(args.config, args.cfg_options, args.work_dir, args.launcher, args.local_rank)
    if args.amp or args.amp_dtype:
        enable_amp(cfg, args.amp_dtype)
    check_schedule(cfg, args.cfg_options, args.allow_schedule_mismatch)
    world_size = launch_world_size(args.launcher)
    check_total_batch(cfg, world_size, args.allow_batch_mismatch, args.auto_scale_lr)
    target = apply_resume(cfg, args.resume)
    done = finished_run(cfg, target)
    if done:
        print_log(done, "current")
        return
    check_resumed_schedule(cfg, target, args.extend_schedule)
    added = add_guard_hooks(cfg)
    if added:
        print_log(f"Guard hooks added: {', '.join(added)}", "current")
    check_dataset_paths(cfg, splits=("train", "val"))
    if not args.skip_data_check:
        scan_data(cfg, ("train", "val"), args.config)
    runner = Runner.from_cfg(cfg) if "runner_type" not in cfg else RUNNERS.build(cfg)
    report_load_from(runner, cfg)  # fine-tuning: which tensors keep their init, in one line
    with naming_validate_dataset(args.config):
        runner.train()


if __name__ == "__main__":
    run_cli(main)
