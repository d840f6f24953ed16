"""tools/run_demo.py stops and resumes as tools/train.py does (a signal: checkpoint, exit 75;
``--resume``), and runs from an installed wheel outside the checkout, with hamseg:: names."""

from __future__ import annotations

import os
import os.path as osp
import re
import signal
import sys

import pytest
import torch

from tests.conftest import REPO
from tests.packaging.test_wheel import build, run
from tests.robust.helpers import finish, start_tool, wait_for_line

pytestmark = pytest.mark.slow

SMALL = ["--data-size", "64", "--num-train", "8", "--num-val", "3", "--no-vis"]
ONE_PROCESS = [
    "--cfg-options",
    "default_hooks.logger.interval=1",
    "train_dataloader.num_workers=0",
    "train_dataloader.persistent_workers=False",
    "val_dataloader.num_workers=0",
    "val_dataloader.persistent_workers=False",
]
LAST = re.compile(r"^HamHead-NMF demo: val mIoU = \d+\.\d$")


def demo(data: str, work: str, *extra: str) -> list[str]:
    args = [osp.join(REPO, "tools", "run_demo.py"), "--data-root", data, "--work-dir", work]
    return [*args, *SMALL, "--max-iters", "8", "--checkpoint-interval", "3", *extra, *ONE_PROCESS]


def test_run_demo_stopped_by_a_signal_then_resumed(tmp_path):
    data, work = str(tmp_path / "cs"), str(tmp_path / "work")
    proc, lines = start_tool(demo(data, work))
    wait_for_line(lines, r"Iter\(train\) \[4/8\]", proc, timeout=600)
    proc.send_signal(signal.SIGTERM)
    code, output = finish(proc, lines)
    assert code == 75, output[-3000:]
    step = int(re.search(r"training stopped by SIGTERM after iteration (\d+)", output).group(1))
    assert 4 <= step < 8 and osp.isfile(osp.join(work, f"iter_{step}.pth"))
    assert osp.isfile(osp.join(work, "iter_3.pth"))  # the periodic one

    code, output = finish(*start_tool(demo(data, work, "--resume")))
    assert code == 0, output[-3000:]
    assert f"resuming at iteration {step}: {step} trained batches skipped at the sampler" in output
    assert LAST.match(output.strip().splitlines()[-1]), output[-500:]
    assert torch.load(osp.join(work, "iter_8.pth"))["meta"]["iter"] == 8

    code, output = finish(*start_tool(demo(data, work, "--resume")))  # nothing left to train
    assert code == 0 and "the run is complete, nothing to train" in output, output[-3000:]
    assert LAST.match(output.strip().splitlines()[-1])


def test_run_demo_from_an_installed_wheel_outside_the_checkout(tmp_path):
    _, wheel = build(tmp_path)
    target, cwd = tmp_path / "target", tmp_path / "user"
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile"]
    run([*pip, "--target", str(target), str(wheel)])
    cwd.mkdir()
    env = dict(os.environ, PYTHONPATH=str(target), OMP_NUM_THREADS="1")
    tool = str(target / "hamseg" / ".mim" / "tools" / "run_demo.py")
    small = [*SMALL, "--max-iters", "2", *ONE_PROCESS]
    out = run([sys.executable, tool, *small], cwd=cwd, env=env).stdout  # the default config
    assert LAST.match(out.strip().splitlines()[-1]), out[-500:]
    assert (cwd / "data" / "context_shapes").is_dir()  # generated where the user is
    named = ["--config", "hamseg::demo/fcn_r18-d8_context-shapes.py", "--work-dir", "fcn"]
    out = run([sys.executable, tool, *named, *small], cwd=cwd, env=env).stdout
    assert re.match(r"^FCN demo: val mIoU = \d+\.\d$", out.strip().splitlines()[-1]), out[-500:]
    assert (cwd / "fcn" / "iter_2.pth").is_file()
