"""tools/analysis_tools/eval_variance.py: the number to report (the mean of N runs of the paper's
protocol with its 95% interval), on one process and on 2 CPU ranks (torchrun, gloo)."""

from __future__ import annotations

import glob
import os
import os.path as osp
import re
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import t

from tests.conftest import REPO, write_tiny_dataset
from tests.data.tiny_twin import TINY_HAM, save_checkpoint
from tests.robust.helpers import data_options

TOOL = osp.join(REPO, "tools", "analysis_tools", "eval_variance.py")


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    """The tiny HamHead (NMF, rank 4) and 5 val images of odd sizes (an odd count: the
    2-rank sampler pads one duplicate, which must not count)."""
    tmp = tmp_path_factory.mktemp("eval_variance")
    data = write_tiny_dataset(str(tmp / "data"), n_train=1, n_val=5)
    config = tmp / "tiny_tta.py"
    config.write_text(
        f"_base_ = [{TINY_HAM!r}]\n"
        "tta_model = dict(type='HamSegTTAModel', scales=[0.75, 1.0])\n"
        "tta_pipeline = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations'), "
        "dict(type='PackSegInputs')]\n"
    )
    checkpoint = save_checkpoint(TINY_HAM, str(tmp / "c.pth"))
    return dict(tmp=tmp, data=data, config=str(config), checkpoint=checkpoint)


def run(setup: dict, name: str, *extra: str, ranks: int = 1) -> subprocess.CompletedProcess:
    launch = [sys.executable]
    if ranks > 1:
        launch += ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}"]
    args = [
        TOOL,
        setup["config"],
        setup["checkpoint"],
        "--work-dir",
        str(setup["tmp"] / name),
        *extra,
    ]
    args += ["--launcher", "pytorch"] if ranks > 1 else []
    args += ["--cfg-options", *data_options(setup["data"])]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=REPO)
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    # cwd: mmengine collects the ranks' results through ./.dist_test
    proc = subprocess.run(
        launch + args, capture_output=True, text=True, env=env, cwd=setup["tmp"], timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def report(stdout: str) -> tuple[list[float], float, float, float]:
    values = re.search(r"^mIoU per run: (.*)$", stdout, re.M).group(1).split(", ")
    found = re.search(r"over \d+ runs: mean ([\d.]+) \+- ([\d.]+) \(95% CI\), std ([\d.]+)", stdout)
    return [float(v) for v in values], *(float(x) for x in found.groups())


def test_the_mean_and_interval_of_the_runs_and_the_ensemble(setup):
    """3 runs differ (a new dictionary at every forward), their mean, 95% t interval and std
    are the printed ones; the ensemble's line gives its difference to that mean."""
    proc = run(setup, "one", "--runs", "3", "--ensemble")
    values, mean, half, std = report(proc.stdout)
    assert len(values) == 3 and len(set(values)) > 1, values
    assert mean == pytest.approx(np.mean(values), abs=1e-4)
    assert std == pytest.approx(np.std(values, ddof=1), abs=1e-4)
    assert half == pytest.approx(t.ppf(0.975, 2) * std / 3**0.5, abs=2e-4)
    ensemble = re.search(r"eval_draws=12\): mIoU ([\d.]+), ([+-][\d.]+) against", proc.stdout)
    assert float(ensemble.group(2)) == pytest.approx(float(ensemble.group(1)) - mean, abs=2e-4)


@pytest.mark.slow
def test_two_ranks_report_what_one_process_reports(setup):
    """torchrun with 2 gloo processes, with and without --tta: the same runs, mean and
    interval as one process (every image draws from its own seed), printed once; so the runs
    also repeat for one --seed."""
    for tta in ([], ["--tta"]):
        one = run(setup, f"one{tta}", "--runs", "3", *tta)
        two = run(setup, f"two{tta}", "--runs", "3", *tta, ranks=2)
        assert report(two.stdout) == report(one.stdout), (one.stdout, two.stdout)
        assert two.stdout.count("mIoU per run") == 1
    assert not glob.glob(str(setup["tmp"] / ".dist_test" / "*"))
