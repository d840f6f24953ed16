"""Train demo heads on Context Shapes (or your data) over several seeds; write a table and chart.

    python tools/compare_demo_heads.py                       # every head x seeds 0 1 2
    python tools/compare_demo_heads.py --seeds 0 --max-iters 50 --out-dir /tmp/cmp   # quick look
    python tools/compare_demo_heads.py --heads fcn ham-nmf attnconv \
        --data-config configs/custom/hamhead-nmf_r18-d8_custom.py --data-root data/my_dataset

--data-config: any dataset config; each head's model and schedule on its loaders, evaluators,
data preprocessor and class count (docs/custom_dataset.md).

Each run is tools/run_demo.py in its own process; runs whose result JSON exists are reused
(--force repeats them). Writes results.md, results.png and runs.json into --out-dir;
--docs-prefix docs/demo_results also writes docs/demo_results.md and .png. docs/demo.md.
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
from hamseg.apis.demo import HEADS, compare_heads  # noqa: E402
from hamseg.cli import run_cli  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    heads = ", ".join(f"{k} ({label})" for k, (label, _) in HEADS.items())
    p.add_argument("--heads", nargs="+", default=list(HEADS), help=f"subset of: {heads}")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--max-iters", type=int, default=None, help="override the schedule length")
    p.add_argument("--data-config", help="dataset config to train on (default: Context Shapes)")
    p.add_argument(
        "--data-root", help="data folder (default: data/context_shapes, or the config's)"
    )
    p.add_argument("--out-dir", default="work_dirs/demo_compare")
    p.add_argument("--docs-prefix", default=None, help="also write <prefix>.md and <prefix>.png")
    p.add_argument("--force", action="store_true", help="repeat runs that already have results")
    args = vars(p.parse_args(argv))
    command = "python tools/compare_demo_heads.py " + shlex.join(
        sys.argv[1:] if argv is None else argv
    )
    demo = [sys.executable, osp.join(ROOT, "tools", "run_demo.py")]
    md, md_path, png_path = compare_heads(demo_command=demo, command=command, cwd=ROOT, **args)
    print(f"{md}\nwrote {md_path} and {png_path}")
    return 0


if __name__ == "__main__":
    run_cli(lambda: sys.exit(main()))
