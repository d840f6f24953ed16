"""Interleaved A/B of this checkout's NMF Hamburger against an older commit's, in one process::

    python tools/analysis/ab_ham_speed.py [--commit 42149e2] [--threads 2] [--rounds 15]
        [--runs 3] [--shape 1 512 128 128] [--variant paper] [--clock wall|thread|process]

Table 3's block (r = 64, K = 6, one draw; the same weights in both): inference (eval, no
autograd) from a random dictionary and from the seeded one (``eval_seed=0``, one draw), and
forward+backward (train mode, ``y.backward(g)``). Each round alternates ``--runs`` calls of the
two blocks (:func:`tools.lab.benchmark.measure.alternate`) and keeps each one's median; the table
gives the median over rounds, the ratio new / old of each round's medians and the spread.
On a loaded machine other processes stretch the wall clock (and with several threads every
parallel region waits for all of them to be scheduled); what they do not stretch: ``--clock
thread``, this thread's CPU time (``--threads 1``), and ``--clock process``, all threads' CPU
time (run with ``OMP_WAIT_POLICY=PASSIVE``, so that a waiting thread sleeps instead of spinning).

The commit's :data:`FILES` (the hams, the block, its fused path and their helpers) come from
``git archive`` and run as the package ``hamseg_<commit>`` (their ``from hamseg.`` imports
renamed); their ``@MODELS.register_module()`` registers nothing, so mmseg's registry keeps this
checkout's classes and the old block is given its ham class.
"""

from __future__ import annotations

import argparse
import io
import os
import os.path as osp
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import types
from collections.abc import Callable
from unittest import mock

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from mmseg.registry import MODELS  # noqa: E402
from torch import nn  # noqa: E402

from hamseg.cli import run_cli  # noqa: E402
from hamseg.models import Hamburger  # noqa: E402
from hamseg.utils.errors import UsageError  # noqa: E402
from tools.lab.benchmark.measure import alternate, machine, spread, table  # noqa: E402

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
#: The commit's modules in import order (the tracing helpers moved from compat/ to models/).
FILES = (
    "compat/tracing.py",
    "models/tracing.py",
    "models/cuda_graphs.py",
    "models/ridge_solve.py",
    "models/decompositions.py",
    "models/fused_hamburger.py",
    "models/hamburger.py",
)


def load_commit(commit: str) -> dict[str, types.ModuleType]:
    """The commit's :data:`FILES` as modules of the package ``hamseg_<commit>``, by file name."""
    package = f"hamseg_{commit}"
    command = ["git", "-C", REPO, "archive", commit, "hamseg/models", "hamseg/compat"]
    archive = subprocess.run(command, capture_output=True, check=True).stdout
    for sub in ("", ".models", ".compat"):
        sys.modules[package + sub] = types.ModuleType(package + sub)
        sys.modules[package + sub].__path__ = []
    modules = {}
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tmp, filter="data")
        for name in FILES:
            path = osp.join(tmp, "hamseg", name)
            if not osp.exists(path):
                continue
            dotted = f"{package}.{name[:-3].replace('/', '.')}"
            with open(path, encoding="utf-8") as f:
                source = f.read().replace("from hamseg.", f"from {package}.")
            module = types.ModuleType(dotted)
            module.__file__ = path
            module.__package__ = dotted.rsplit(".", 1)[0]
            sys.modules[dotted] = module
            with mock.patch.object(MODELS, "register_module", lambda **kw: lambda cls: cls):
                exec(compile(source, path, "exec"), module.__dict__)
            modules[osp.basename(name)[:-3]] = module
    return modules


def build_pair(commit: str, channels: int, variant: str, **ham: object) -> tuple[nn.Module, ...]:
    """(this checkout's, the commit's) NMF Hamburger, r = 64, K = 6, with the same weights."""
    old = load_commit(commit)
    ham = dict(S=1, R=64, train_steps=6, eval_steps=6, **ham)
    args = (channels, channels)
    kwargs = dict(variant=variant, norm_cfg=dict(type="BN", requires_grad=True))
    torch.manual_seed(0)
    new = Hamburger(*args, ham_cfg=dict(type="NMF", **ham), **kwargs)
    ham_cfg = dict(type=old["decompositions"].NMF, **ham)
    ref = old["hamburger"].Hamburger(*args, ham_cfg=ham_cfg, **kwargs)
    ref.load_state_dict(new.state_dict())
    return new, ref


def relative_difference(new: nn.Module, ref: nn.Module, x: torch.Tensor) -> float:
    """Max |new - old| / max |old| of the two blocks' inference from one given dictionary."""
    bases = F.normalize(torch.rand(x.shape[0], x.shape[1], 64), dim=1)
    with torch.no_grad():
        a = new.eval()(x, bases)
        b = ref.eval()(x, bases)
    return float((a - b).abs().max() / b.abs().max())


def rounds_of(
    fns: dict[str, Callable[[], None]], rounds: int, runs: int, clock: Callable[[], float]
) -> dict[str, list]:
    """Per round, each call's median (ms) of ``runs`` alternating calls."""
    medians: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, times in alternate(fns, torch.device("cpu"), runs, clock).items():
            medians[name].append(1e3 * statistics.median(times))
    return medians


def ab(
    commit: str, x: torch.Tensor, variant: str, rounds: int, runs: int, clock: Callable[[], float]
) -> list[dict]:
    """The A/B's rows: per call, the per-round medians of the new and the old block."""
    grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(1))
    xr = x.clone().requires_grad_(True)

    def infer(block: nn.Module) -> Callable[[], None]:
        def call() -> None:
            with torch.no_grad():
                block(x)

        return call

    def train(block: nn.Module) -> Callable[[], None]:
        def call() -> None:
            block.zero_grad(set_to_none=True)
            xr.grad = None
            block(xr).backward(grad)

        return call

    pair = build_pair(commit, x.shape[1], variant)
    seeded = build_pair(commit, x.shape[1], variant, eval_seed=0)
    rows = [dict(call="check", diff=relative_difference(*pair, x))]
    cases = (
        ("inference", pair, infer, False),
        ("inference, seeded (eval_seed=0, 1 draw)", seeded, infer, False),
        ("forward+backward", pair, train, True),
    )
    for call, (new, ref), fn, training in cases:
        new.train(training), ref.train(training)
        medians = rounds_of({"new": fn(new), "old": fn(ref)}, rounds, runs, clock)
        print(f"[ab] {call}: new {medians['new']} old {medians['old']}", flush=True)
        rows.append(dict(call=call, **medians))
    return rows


def markdown(rows: list[dict], head: str) -> str:
    """The rows of :func:`ab` as a markdown table under ``head``."""
    cells = []
    for r in rows[1:]:
        new = r["new"]
        old = r["old"]
        ratios = [a / b for a, b in zip(new, old)]
        cells.append(
            (
                r["call"],
                f"{statistics.median(old):.1f} ms ({100 * spread(old):.0f}%)",
                f"{statistics.median(new):.1f} ms ({100 * spread(new):.0f}%)",
                f"**{statistics.median(ratios):.3f}x**",
                f"{min(ratios):.3f}-{max(ratios):.3f}",
                f"{sum(a < 1 for a in ratios)}/{len(ratios)}",
            )
        )
    cols = ("call", "old (spread)", "new (spread)", "new / old", "min-max", "rounds new faster")
    return "\n".join([head, "", *table(cols, cells)]) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--commit", default="42149e2")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=15, help="rounds of alternating calls")
    p.add_argument("--runs", type=int, default=3, help="calls of each block per round")
    p.add_argument("--shape", type=int, nargs=4, default=[1, 512, 128, 128])
    p.add_argument("--variant", default="paper", choices=["paper", "release"])
    p.add_argument("--clock", default="wall", choices=["wall", "thread", "process"])
    args = p.parse_args(argv)
    if args.clock == "thread" and args.threads != 1:
        raise UsageError("--clock thread counts this thread's CPU time only: use --threads 1")
    if args.clock == "process" and os.environ.get("OMP_WAIT_POLICY", "").upper() != "PASSIVE":
        raise UsageError("--clock process: set OMP_WAIT_POLICY=PASSIVE (spinning threads count)")
    clock = dict(wall=time.perf_counter, thread=time.thread_time, process=time.process_time)
    clock = clock[args.clock]
    torch.set_num_threads(args.threads)
    x = torch.rand(*args.shape, generator=torch.Generator().manual_seed(0))
    start = os.getloadavg()[0]
    rows = ab(args.commit, x, args.variant, args.rounds, args.runs, clock)
    end = os.getloadavg()[0]
    shape = "x".join(map(str, args.shape))
    head = (
        f"NMF Hamburger ({args.variant}, r=64, K=6), input {shape}, {machine()['cpu']}, "
        f"{args.threads} threads, {args.clock} clock; new = this checkout, old = {args.commit}; "
        "per call the median "
        f"over {args.rounds} rounds of each round's median of {args.runs} alternating calls; "
        f"load average {start:.1f} at start, {end:.1f} at end; outputs from one dictionary "
        f"agree to {rows[0]['diff']:.1e} (relative)"
    )
    print(markdown(rows, head))


if __name__ == "__main__":
    run_cli(main)
