"""mmengine's ``compile=True`` trains a hamseg model on the CPU as eager mode does (slow: inductor
compiles the forward and backward, about a minute)."""

import glob
import json
import os.path as osp
import sys

import pytest

from tests.conftest import REPO
from tests.helpers import data_options, run_tool

TINY_HAM = osp.join(REPO, "tests", "data", "tiny_ham.py")
#: tools/train.py with inductor's random numbers equal to eager's (the NMF draws its dictionary)
TRAIN = (
    "import runpy, sys, torch._inductor.config as c; c.fallback_random = True; "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def losses(work_dir: str) -> list[float]:
    (scalars,) = glob.glob(osp.join(work_dir, "*", "vis_data", "scalars.json"))
    with open(scalars) as f:
        return [row["loss"] for row in map(json.loads, f) if "loss" in row]


@pytest.mark.slow
def test_compile_true_trains_like_eager(tmp_path, tiny_data):
    options = [*data_options(tiny_data), "max_iters=5", "default_hooks.logger.interval=1"]
    found = {}
    for mode, extra in (("eager", []), ("compiled", ["compile=True"])):
        work_dir = str(tmp_path / mode)
        cmd = [sys.executable, "-c", TRAIN, osp.join(REPO, "tools", "train.py"), TINY_HAM]
        result = run_tool([*cmd[1:], "--work-dir", work_dir, "--cfg-options", *options, *extra])
        assert result.returncode == 0, result.stderr[-3000:]
        found[mode] = losses(work_dir)
    assert len(found["eager"]) == 5
    assert found["compiled"] == pytest.approx(found["eager"], abs=1e-4)
