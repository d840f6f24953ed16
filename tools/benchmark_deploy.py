"""CPU latency, PyTorch eager vs ONNX Runtime, of the demo model (1x3x128x128) and
configs/ham_voc.py (1x3x513x513); docs/deploy.md records one run::

    python tools/benchmark_deploy.py [--runs 10] [--threads N] [--out FILE.md] [--out-dir DIR]
"""

import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack, registers hamseg; before mmseg is used)

# isort: split
from hamseg.apis.export import require_deploy  # noqa: E402
from hamseg.benchmark.deploy import DEFAULT_CASES, as_json, latency, markdown  # noqa: E402
from hamseg.benchmark.measure import write_report  # noqa: E402
from hamseg.cli import CLIError, run_cli  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add = p.add_argument
    add("--runs", type=int, default=10)
    add("--threads", type=int, default=0, help="ONNX Runtime intra-op threads (0: its default)")
    add("--device", default="cpu", help="cpu only (ONNX Runtime's CPU provider)")
    add("--out", help="also write the table to this markdown file")
    add("--out-dir", help="also write deploy.md and deploy.json (every number) here")
    args = p.parse_args()
    if args.device != "cpu":
        raise CLIError(f"--device {args.device}: this benchmark measures the CPU provider only")
    require_deploy()
    rows = [(n, latency(cfg, size, args.runs, args.threads)) for n, cfg, size in DEFAULT_CASES]
    table = markdown(rows)
    print(table)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(table)
    if args.out_dir:
        write_report(osp.join(args.out_dir, "deploy"), table, as_json(rows, args.threads))


if __name__ == "__main__":
    run_cli(main)
