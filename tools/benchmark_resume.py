"""Time from launch to the first resumed iteration, at several iterations (docs/robustness.md).

    python tools/benchmark_resume.py CONFIG CHECKPOINT --at 10 2000 --repeats 3 \
        [--baseline-root ../other-checkout] [--cfg-options data_root=...]

For each N of ``--at`` the checkpoint is copied with its iteration counters (``meta.iter``, the
schedulers' ``last_step``) set to N: what a resume does before the first iteration depends on N
only through them. Each run is ``tools/train.py CONFIG --resume --skip-data-check`` in a fresh
work dir, timed from launch to its log line of iteration N + 1, then killed; runs alternate
between the Ns (and this checkout and ``--baseline-root``'s), ``--repeats`` rounds; the last
lines give, per checkout, the difference between the largest and the smallest N within a round.
"""

from __future__ import annotations

import argparse
import os
import os.path as osp
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import torch  # noqa: E402

import hamseg  # noqa: E402,F401  (the checkpoint allow-list)

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
#: Student's t, two-sided 95%, by degrees of freedom (``--repeats`` - 1).
_T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}


def at_iteration(checkpoint: str, step: int, out: str) -> str:
    """A copy of ``checkpoint`` whose iteration counters say ``step``."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    state["meta"]["iter"] = step
    for scheduler in state.get("param_schedulers", []):
        scheduler["last_step"] = step
    torch.save(state, out)
    return out


def time_to_iteration(root: str, config: str, checkpoint: str, step: int, options: list) -> float:
    """Seconds from launching ``root``'s tools/train.py to its log line of iteration step+1."""
    work = tempfile.mkdtemp(prefix="resume_bench_")
    shutil.copy(checkpoint, osp.join(work, f"iter_{step}.pth"))
    cmd = [sys.executable, osp.join(root, "tools", "train.py"), config, "--work-dir", work]
    cmd += ["--resume", "--skip-data-check", "--cfg-options", *options]
    cmd += ["default_hooks.logger.interval=1"]
    env = dict(os.environ, PYTHONPATH=root)
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    pattern = re.compile(rf"Iter\(train\) \[\s*{step + 1}/")
    try:
        for line in proc.stdout:
            if pattern.search(line):
                return time.perf_counter() - start
        raise RuntimeError(f"{' '.join(cmd)} ended before iteration {step + 1}")
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("config")
    p.add_argument("checkpoint", help="a checkpoint of CONFIG's run (any iteration)")
    p.add_argument("--at", type=int, nargs="+", default=[10, 2000])
    p.add_argument("--repeats", type=int, default=5, help="rounds (at least 2)")
    p.add_argument("--baseline-root", help="another checkout to time the same way")
    p.add_argument("--cfg-options", nargs="*", default=[], help="key=value for train.py")
    args = p.parse_args()
    roots = {"this": ROOT} | ({"baseline": args.baseline_root} if args.baseline_root else {})
    folder = tempfile.mkdtemp(prefix="resume_bench_ckpt_")
    made = {n: at_iteration(args.checkpoint, n, osp.join(folder, f"{n}.pth")) for n in args.at}
    options = [*args.cfg_options, f"max_iters={max(args.at) + 10}"]
    times: dict = {(name, n): [] for name in roots for n in args.at}
    for _ in range(args.repeats):
        for n in args.at:
            for name, root in roots.items():
                times[name, n].append(time_to_iteration(root, args.config, made[n], n, options))
    for (name, n), values in times.items():
        spread = f"{min(values):.1f}-{max(values):.1f}"
        print(f"{name} N={n}: median {statistics.median(values):.1f} s ({spread}, n={len(values)})")
    first = min(args.at)
    last = max(args.at)
    for name in roots:  # paired by round: the same load on both
        gaps = [b - a for a, b in zip(times[name, first], times[name, last])]
        mean = statistics.mean(gaps)
        listed = ", ".join(f"{g:+.1f}" for g in gaps)
        half = _T95.get(len(gaps) - 1, 1.96) * statistics.stdev(gaps) / len(gaps) ** 0.5
        print(
            f"{name} N={last} minus N={first}, per round: mean {mean:+.1f} s, 95% interval "
            f"{mean - half:+.1f} to {mean + half:+.1f} (t, n={len(gaps)}; {listed})"
        )
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
