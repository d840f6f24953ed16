"""The hamseg demo: generate Context Shapes if absent, train a demo head on CPU, print val mIoU.

    python tools/run_demo.py                      # HamHead-NMF, seed 0, a few minutes on 2 cores
    python tools/run_demo.py --config configs/demo/fcn_r18-d8_context-shapes.py   # local baseline
    python tools/run_demo.py --max-iters 20 --work-dir /tmp/smoke                  # smoke test
    python tools/run_demo.py --resume                  # continue a stopped run (bare: latest)

The last line printed is ``<head> demo: val mIoU = <value>``. The work dir gets a checkpoint
every 100 iterations (the last two kept) and at the end, the log, TensorBoard scalars,
validation predictions and ``demo_result.json``. As tools/train.py: a signal (SIGTERM, SIGUSR1,
Ctrl-C) checkpoints the current iteration and exits 75 (``--resume`` continues), a non-finite
loss exits 65. A smaller data set: tools/dataset_converters/generate_context_shapes.py, then
--data-root. docs/demo.md.
"""

import argparse

from mmengine.config import Config, DictAction
from mmengine.logging import print_log

from hamseg.apis.demo import DEFAULT_DEMO_CONFIG, run_demo
from hamseg.cli import add_guard_hooks, run_cli
from hamseg.cli.resume import apply_resume, check_resumed_schedule, finished_run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", default=DEFAULT_DEMO_CONFIG, help="file or hamseg::demo/NAME.py")
    p.add_argument("--data-root", help="data folder (default: data/context_shapes)")
    p.add_argument("--data-config", help="train on this dataset config's data (not generated)")
    p.add_argument("--work-dir", help="default: work_dirs/demo/<config name>")
    p.add_argument("--seed", type=int, help="training seed (config default: 0)")
    p.add_argument("--max-iters", type=int, help="another schedule length")
    p.add_argument("--no-vis", action="store_true", help="no validation prediction images")
    p.add_argument("--cfg-options", nargs="+", action=DictAction, help="config keys: key=value")
    p.add_argument("--resume", nargs="?", const="auto", help="a checkpoint; bare: the latest")
    args = vars(p.parse_args())
    resume, seed, options = args.pop("resume"), args.pop("seed"), args["cfg_options"] or {}
    options.update({"randomness.seed": seed} if seed is not None else {})
    options.update({"default_hooks.visualization.draw": False} if args.pop("no_vis") else {})
    args["cfg_options"] = options

    def prepare(cfg: Config) -> bool:  # tools/train.py's guard hooks and --resume
        print_log(f"Guard hooks added: {', '.join(add_guard_hooks(cfg))}", "current")
        target = apply_resume(cfg, resume)
        done = finished_run(cfg, target)
        if done:
            print_log(done, "current")
            return False
        check_resumed_schedule(cfg, target)
        return True

    result = run_demo(**args, prepare=prepare)
    print(f"checkpoint: {result['checkpoint']}  ({result['total_time_s']:.0f} s)")
    print(f"{result['name']} demo: val mIoU = {result['mIoU']:.1f}")


if __name__ == "__main__":
    run_cli(main)
