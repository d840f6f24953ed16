"""Test (and evaluate) a segmentor: mmseg 1.2.2's tools/test.py with hamseg's additions.

hamseg adds: the checkpoint checked against the model (another class count stops in one line),
every sample scanned before testing, ``--show-dir`` painting every rank's images (ground truth |
prediction), ``--out`` created on every rank, ``--cfg-options`` keys checked. docs/usage.md.

    python tools/test.py configs/ham_voc.py CKPT [--tta] [--out DIR] [--show-dir DIR]
"""

import argparse
import os
import os.path as osp

from mmengine.config import DictAction
from mmengine.logging import print_log
from mmengine.runner import Runner

import hamseg  # noqa: F401  (adapts the stack and registers hamseg before mmseg is used)
from hamseg.apis.checkpoint import check_checkpoint_file
from hamseg.cli import LAUNCHERS, CLIError, build_config, run_cli
from hamseg.cli.common import log_notices
from hamseg.cli.preflight import naming_validate_dataset, scan_data
from hamseg.datasets.checks import check_dataset_paths
from hamseg.engine.tta import use_tta
from hamseg.utils.errors import require_file


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="MMSeg test (and eval) a model")
    parser.add_argument("config", help="test config file path")
    parser.add_argument("checkpoint", help="checkpoint file")
    parser.add_argument("--work-dir", help="where evaluation results are written as json")
    parser.add_argument("--out", help="directory to save output predictions (PNG)")
    parser.add_argument("--show", action="store_true", help="show prediction results")
    parser.add_argument(
        "--show-dir", help="paint every rank's test images into SHOW_DIR/vis_data/vis_image"
    )
    parser.add_argument("--wait-time", type=float, default=2, help="the interval of show (s)")
    parser.add_argument(
        "--cfg-options",
        nargs="+",
        action=DictAction,
        help="override config keys: key=value (a key the config lacks: +key=value)",
    )
    parser.add_argument("--launcher", choices=LAUNCHERS, default="none", help="job launcher")
    parser.add_argument("--tta", action="store_true", help="test time augmentation")
    parser.add_argument("--skip-data-check", action="store_true", help="no scan of the samples")
    parser.add_argument("--local_rank", "--local-rank", type=int, default=0)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    checkpoint = require_file(args.checkpoint, "checkpoint file")
    cfg = build_config(args.config, args.cfg_options, args.work_dir, args.launcher, args.local_rank)
    cfg.load_from = checkpoint
    if args.show or args.show_dir:
        hook = cfg.default_hooks.get("visualization")
        if hook is None:
            raise CLIError("--show/--show-dir need default_hooks.visualization in the config")
        hook.update(draw=True, interval=1)  # every image, not every 10th
        if hook.get("type") in ("SegVisualizationHook", "mmseg.SegVisualizationHook"):
            hook["type"] = "mmseg.EveryRankVisualizationHook"  # mmseg's paints rank 0's only
        cfg.visualizer.setdefault("alpha", 0.5)
        if args.show:
            hook.update(show=True, wait_time=args.wait_time)
        if args.show_dir:
            cfg.visualizer["save_dir"] = args.show_dir
    if args.tta:
        use_tta(cfg)
    if args.out is not None:
        cfg.test_evaluator["output_dir"] = args.out
        cfg.test_evaluator["keep_results"] = True
        os.makedirs(args.out, exist_ok=True)  # mmseg's IoUMetric makes it on rank 0 only
    check_dataset_paths(cfg, splits=("test",))
    if not args.skip_data_check:
        scan_data(cfg, ("test",), args.config)
    runner = Runner.from_cfg(cfg)
    log_notices()
    check_checkpoint_file(runner.model, checkpoint)  # strict: another class count stops here
    with naming_validate_dataset(args.config):
        runner.test()
    if args.show_dir:  # mmengine Visualizer: <save_dir>/vis_data, LocalVisBackend: vis_image
        where = osp.join(args.show_dir, "vis_data", "vis_image")
        print_log(f"--show-dir: painted images (ground truth | prediction) in {where}", "current")


if __name__ == "__main__":
    run_cli(main)
