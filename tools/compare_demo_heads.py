"""Train decode heads on a demo task (or your data) over seeds, evaluate every head under one
protocol, and write a table, per-seed dots and learning curves (docs/demo.md).

    python tools/compare_demo_heads.py --task rooms                 # every head x seeds 0-9
    python tools/compare_demo_heads.py --heads fcn gap ham-nmf --seeds 0 --max-iters 50
    python tools/compare_demo_heads.py --heads ham-nmf nmf-r32 --variant nmf-r32 ham-nmf \\
        model.decode_head.ham_cfg.R=32                              # a head of your own
    python tools/compare_demo_heads.py --heads fcn ham-nmf attnconv \\
        --data-config configs/custom/hamhead-nmf_r18-d8_custom.py --data-root data/my_dataset

--protocol paper (default): ham heads evaluated with a fresh random dictionary per forward,
each run's value the mean of --eval-runs evaluations (the paper's way); ensemble: the mean of
12 seeded draws. Both numbers are computed for every ham run, the other one shown beside.

Each training runs tools/run_demo.py in its own process on a config written into its folder
(<out-dir>/<head>/seed<N>/config.py); a run whose run.json exists is reused (--force repeats
it). Writes results.md, results.png, curves.png, runs.json (and timing.json) into --out-dir;
--docs-prefix docs/demo_results also writes docs/demo_results.md, .png and _curves.png.
"""

from __future__ import annotations

import argparse
import os.path as osp
import shlex
import sys

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, ROOT)  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from mmengine.config import DictAction  # noqa: E402

from hamseg.cli import run_cli  # noqa: E402
from tools.lab.analysis.head_comparison import HEADS, PROTOCOLS, TASKS, compare_heads  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    names = ", ".join(f"{k} ({h.label})" for k, h in HEADS.items())
    p.add_argument("--heads", nargs="+", default=list(HEADS), help=f"subset of: {names}")
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    p.add_argument("--task", default="shapes", choices=list(TASKS), help="the generated task")
    p.add_argument("--protocol", default="paper", choices=list(PROTOCOLS))
    p.add_argument(
        "--variant",
        dest="variants",
        nargs="+",
        action="append",
        default=[],
        metavar="NAME BASE KEY=VALUE",
        help="a head NAME: head BASE with these config options (repeatable)",
    )
    p.add_argument("--cfg-options", nargs="+", action=DictAction, help="for every head")
    p.add_argument("--max-iters", type=int, default=None, help="override the schedule length")
    p.add_argument("--curve-interval", type=int, default=100, help="validate every N iterations")
    p.add_argument("--eval-runs", type=int, default=5, help="paper-protocol evaluations per run")
    p.add_argument("--threshold", type=float, default=90.0, help="val mIoU counted as solved")
    p.add_argument("--time-rounds", type=int, default=10, help="timing rounds (0: no timing)")
    p.add_argument("--data-config", help="dataset config to train on (default: the task's)")
    p.add_argument("--data-root", help="data folder (default: the task's or the config's)")
    p.add_argument("--out-dir", default="work_dirs/demo_compare")
    p.add_argument("--docs-prefix", default=None, help="also write <prefix>.md and .png files")
    p.add_argument("--force", action="store_true", help="repeat runs that already have results")
    args = vars(p.parse_args(argv))
    command = "python tools/compare_demo_heads.py " + shlex.join(
        sys.argv[1:] if argv is None else argv
    )
    demo = [sys.executable, osp.join(ROOT, "tools", "run_demo.py")]
    md, paths = compare_heads(demo_command=demo, command=command, cwd=ROOT, **args)
    print(f"{md}\nwrote {', '.join(paths)}")
    return 0


if __name__ == "__main__":
    run_cli(lambda: sys.exit(main()))
