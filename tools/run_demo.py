"""The hamseg demo: generate Context Shapes if absent, train a demo head on CPU, print val mIoU.

    python tools/run_demo.py                      # HamHead-NMF, seed 0, a few minutes on 2 cores
    python tools/run_demo.py --config configs/demo/fcn_r18-d8_context-shapes.py   # local baseline
    python tools/run_demo.py --max-iters 20 --work-dir /tmp/smoke                  # smoke test
    python tools/run_demo.py --resume                  # continue a stopped run (bare: latest)

The last line printed is ``<head> demo: val mIoU = <value>``. The work dir gets a checkpoint
every --checkpoint-interval iterations (the last two kept) and at the end, the log, TensorBoard
scalars, validation predictions and ``demo_result.json``. As tools/train.py: a signal (SIGTERM,
SIGUSR1, Ctrl-C) checkpoints the current iteration and exits 75 (``--resume`` continues it), a
non-finite loss exits 65. --config takes files and packaged names (hamseg::demo/...). docs/demo.md.
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from mmengine.config import Config, DictAction  # noqa: E402
from mmengine.logging import print_log  # noqa: E402

from hamseg.apis.demo import CHECKPOINT_INTERVAL, DEFAULT_DEMO_CONFIG, run_demo  # noqa: E402
from hamseg.cli import add_guard_hooks, run_cli  # noqa: E402
from hamseg.cli.resume import apply_resume, check_resumed_schedule, finished_run  # noqa: E402


def guarded(resume: str | None):
    """What ``run_demo`` does before building the Runner: train.py's guard hooks and
    ``--resume``; False if the run is already complete."""

    def prepare(cfg: Config) -> bool:
        print_log(f"Guard hooks added: {', '.join(add_guard_hooks(cfg))}", "current")
        target = apply_resume(cfg, resume)
        done = finished_run(cfg, target)
        if done:
            print_log(done, "current")
            return False
        check_resumed_schedule(cfg, target)
        return True

    return prepare


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--config", default=DEFAULT_DEMO_CONFIG, help="demo config: file or hamseg::name"
    )
    p.add_argument("--data-root", help="data folder (default: data/context_shapes)")
    p.add_argument("--data-config", help="train on this dataset config's data (not generated)")
    p.add_argument("--work-dir", help="default: work_dirs/demo/<config name>")
    p.add_argument("--seed", type=int, default=None, help="training seed (config default: 0)")
    p.add_argument("--max-iters", type=int, default=None, help="override the schedule length")
    p.add_argument("--data-size", type=int, default=None, help="generate images of this side")
    p.add_argument("--num-train", type=int, default=None, help="generate this many train images")
    p.add_argument("--num-val", type=int, default=None, help="generate this many val images")
    p.add_argument("--no-vis", action="store_true", help="skip validation prediction images")
    p.add_argument("--json-out", default=None, help="also write the result JSON here")
    p.add_argument("--cfg-options", nargs="+", action=DictAction, help="config keys: key=value")
    p.add_argument(
        "--checkpoint-interval", type=int, default=CHECKPOINT_INTERVAL, help="iterations"
    )
    p.add_argument(
        "--resume",
        nargs="?",
        const="auto",
        help="continue from a checkpoint, or (no value) the work dir's latest; none: a new run",
    )
    args = vars(p.parse_args(argv))
    args["draw"] = not args.pop("no_vis")
    prepare = guarded(args.pop("resume"))
    r = run_demo(**args, prepare=prepare)
    print(f"checkpoint: {r['checkpoint']}  (train {r['train_time_s']:.0f} s, ", end="")
    print(f"eval {r['val_time_s']:.0f} s)\n{r['name']} demo: val mIoU = {r['mIoU']:.1f}")


if __name__ == "__main__":
    run_cli(main)
