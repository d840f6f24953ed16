"""The hamseg demo: generate Context Shapes if absent, train a demo head on CPU, print val mIoU.

    python tools/run_demo.py                      # HamHead-NMF, seed 0, a few minutes on 2 cores
    python tools/run_demo.py --config configs/demo/fcn_r18-d8_context-shapes.py   # local baseline
    python tools/run_demo.py --max-iters 20 --work-dir /tmp/smoke                  # smoke test

The last line printed is ``<head> demo: val mIoU = <value>``. The work dir gets the checkpoint,
the log, TensorBoard scalars, validation predictions and ``demo_result.json``. docs/demo.md.
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from mmengine.config import DictAction  # noqa: E402

from hamseg.apis.demo import DEFAULT_DEMO_CONFIG, run_demo  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", default=DEFAULT_DEMO_CONFIG, help="demo config (configs/demo/*.py)")
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
    args = vars(p.parse_args(argv))
    args["draw"] = not args.pop("no_vis")
    r = run_demo(**args)
    print(f"checkpoint: {r['checkpoint']}  (train {r['train_time_s']:.0f} s, ", end="")
    print(f"eval {r['val_time_s']:.0f} s)\n{r['name']} demo: val mIoU = {r['mIoU']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
