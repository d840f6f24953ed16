"""One rank of a 2-process gloo group that leaves through ``run_cli`` (tests/engine/test_stop.py).

It builds a DDP model held by a reference cycle (as mmengine's runner holds it), runs one
backward pass (a gloo all-reduce), then either raises ``TrainingStopped`` (``--stop``, exit code
65) or returns. At exit (``atexit``, before the interpreter finalizes) it prints the names of the
gloo threads still running: a thread still running then can abort the process
("terminate called without an active exception") when it drops a tensor while the interpreter
finalizes.
"""

from __future__ import annotations

import atexit
import os
import os.path as osp
import sys

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, REPO)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402

from hamseg.cli import run_cli  # noqa: E402
from hamseg.engine.stop import TrainingStopped  # noqa: E402


def gloo_threads() -> list[str]:
    """Names of this process's threads that belong to gloo (``pt_gloo_runloop``, ...)."""
    names = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/comm") as f:
            names.append(f.read().strip())
    return sorted(name for name in names if "gloo" in name)


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    runner = {"model": nn.parallel.DistributedDataParallel(nn.Linear(3, 2))}
    runner["self"] = runner  # freed by the garbage collector only, like mmengine's runner
    runner["model"](torch.randn(5, 3)).sum().backward()  # DDP's gradient all-reduce
    print(f"gloo threads while training: {gloo_threads()}", flush=True)
    if "--stop" in sys.argv:
        raise TrainingStopped("stopped on purpose", 65)


atexit.register(lambda: print(f"gloo threads at exit: {gloo_threads()}", flush=True))
run_cli(main)
