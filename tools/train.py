"""Train a segmentor: mmseg 1.2.2's tools/train.py with hamseg's additions.

mmseg's command line means what it means in mmseg (``--resume`` resumes ``load_from`` given on
the command line, else the work dir's latest checkpoint). hamseg adds: a config file's own
``load_from`` is a fine-tuning start (a bare ``--resume`` starts a new run from it while the work
dir has no complete checkpoint), guard hooks (a signal checkpoints and exits 75, a non-finite
loss exits 65, exact resume), ``--cfg-options`` keys checked (``+KEY=VALUE`` adds one), the
checks before iteration 1 (every sample, the recipe's total batch) and ``--amp`` on CPU.
docs/usage.md.

    python tools/train.py configs/ham_voc.py [--resume] [--cfg-options load_from=CKPT]
"""

import argparse

from mmengine.config import DictAction
from mmengine.logging import print_log
from mmengine.runner import Runner
from mmseg.registry import RUNNERS

import hamseg  # noqa: F401  (adapts the stack and registers hamseg before mmseg is used)
from hamseg.cli import LAUNCHERS, add_guard_hooks, build_config, enable_amp, run_cli
from hamseg.cli.common import log_notices
from hamseg.cli.preflight import (
    check_schedule,
    check_total_batch,
    launch_world_size,
    naming_validate_dataset,
    scan_data,
)
from hamseg.cli.resume import apply_resume, check_resumed_schedule, finished_run
from hamseg.datasets.checks import check_dataset_paths


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Train a segmentor")
    parser.add_argument("config", help="train config file path")
    parser.add_argument("--work-dir", help="the dir to save logs and models")
    parser.add_argument(
        "--resume",
        action="store_true",
        default=False,
        help="resume from load_from given with --cfg-options, else from the latest complete "
        "checkpoint in the work_dir (none yet: a new run, from the config's load_from if any)",
    )
    parser.add_argument("--amp", action="store_true", default=False, help="mixed precision")
    parser.add_argument(
        "--amp-dtype", choices=("float16", "bfloat16"), help="--amp with this dtype"
    )
    parser.add_argument(
        "--cfg-options",
        nargs="+",
        action=DictAction,
        help="override config keys: key=value (a key the config lacks: +key=value)",
    )
    parser.add_argument("--skip-data-check", action="store_true", help="no scan of the samples")
    parser.add_argument(
        "--auto-scale-lr", action="store_true", help="lr x total batch / recipe's batch"
    )
    parser.add_argument("--launcher", choices=LAUNCHERS, default="none", help="job launcher")
    parser.add_argument("--local_rank", "--local-rank", type=int, default=0)
    args, rest = parser.parse_known_args()
    if rest:
        hint = (
            "; --resume takes no path: --resume --cfg-options load_from=PATH" if args.resume else ""
        )
        parser.error(f"unrecognized arguments: {' '.join(rest)}{hint}")
    return args


def main() -> None:
    args = parse_args()
    cfg = build_config(args.config, args.cfg_options, args.work_dir, args.launcher, args.local_rank)
    if args.amp or args.amp_dtype:
        enable_amp(cfg, args.amp_dtype)
    check_schedule(cfg)
    check_total_batch(cfg, launch_world_size(args.launcher), args.auto_scale_lr)
    target = apply_resume(cfg, args.resume, args.cfg_options)
    done = finished_run(cfg, target)
    if done:
        print_log(done, "current")
        return
    check_resumed_schedule(cfg, target)
    print_log(f"Guard hooks added: {', '.join(add_guard_hooks(cfg))}", "current")
    check_dataset_paths(cfg, splits=("train", "val"))
    if not args.skip_data_check:
        scan_data(cfg, ("train", "val"), args.config)
    runner = Runner.from_cfg(cfg) if "runner_type" not in cfg else RUNNERS.build(cfg)
    log_notices()  # after mmengine's config dump: hamseg's lines stay visible
    with naming_validate_dataset(args.config):
        runner.train()


if __name__ == "__main__":
    run_cli(main)
