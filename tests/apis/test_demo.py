"""hamseg.apis.demo and tools/run_demo.py: the demo trains through mmseg's pipeline and Runner
and stops and resumes as tools/train.py does (from a wheel: tests/packaging/test_ecosystem.py)."""

from __future__ import annotations

import glob
import json
import os
import os.path as osp
import re
import signal
import subprocess
import sys

import pytest
import torch
from mmengine.config import Config

from hamseg.apis.demo import head_config, set_schedule_length
from hamseg.datasets.context_shapes import ContextShapesConfig, generate_context_shapes
from tests.conftest import REPO
from tests.helpers import DEMO_NMF

ONE_PROCESS = ["default_hooks.logger.interval=1"]
ONE_PROCESS += [f"{s}_dataloader.num_workers=0" for s in ("train", "val")]
ONE_PROCESS += [f"{s}_dataloader.persistent_workers=False" for s in ("train", "val")]
LAST = re.compile(r"^(\S+) demo: val mIoU = (\d+\.\d)$")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("demo") / "context_shapes")
    generate_context_shapes(root, ContextShapesConfig(size=64, num_train=8, num_val=3), False)
    return root


def command(args: list[str], *options: str) -> list[str]:
    return [sys.executable, *args, "--cfg-options", *ONE_PROCESS, *options]


def demo(args: list[str], *options: str, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1") | kwargs.pop("env", {})
    cmd = command(args, *options)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, **kwargs)


def test_set_schedule_length_rescales_the_schedulers():
    cfg = Config.fromfile(DEMO_NMF)
    old = cfg.train_cfg.max_iters
    set_schedule_length(cfg, 30)
    assert cfg.train_cfg.max_iters == cfg.train_cfg.val_interval == 30
    assert cfg.default_hooks.checkpoint.interval == 30
    warm, poly = cfg.param_scheduler  # a warm-up of a tenth of the run
    assert (warm["end"], poly["begin"], poly["end"]) == (3, 3, 30)
    cfg = Config.fromfile(DEMO_NMF)
    set_schedule_length(cfg, old)
    assert cfg.param_scheduler[0]["end"] == 20 and cfg.param_scheduler[1]["end"] == old


def test_head_config_takes_the_data_configs_data_and_imports_after_its_own(tmp_path):
    data = tmp_path / "my_data.py"
    data.write_text(
        f"_base_ = [{osp.join(REPO, 'configs', 'custom', 'hamhead-nmf_r18-d8_custom.py')!r}]\n"
        "custom_imports = dict(imports=['colorsys', 'hamseg'])\n"
    )
    cfg = head_config(DEMO_NMF, str(data), data_root="/somewhere")
    assert cfg.custom_imports == dict(imports=["hamseg", "colorsys"], allow_failed_imports=False)
    assert cfg.model.decode_head.num_classes == 3  # the template's background, cat, dog
    assert cfg.train_dataloader.dataset.type == "BaseSegDataset"  # replaced, not merged
    roots = {cfg[f"{s}_dataloader"].dataset.data_root for s in ("train", "val", "test")}
    assert roots == {"/somewhere"}
    assert head_config(DEMO_NMF).custom_imports.imports == ["hamseg"]
    with pytest.raises(FileNotFoundError, match="nope.py"):
        head_config(DEMO_NMF, "nope.py")


def test_a_short_demo_run_end_to_end(data, tmp_path):
    """2 iterations: the last line, demo_result.json, a checkpoint, TensorBoard scalars and one
    validation picture per image."""
    work = str(tmp_path / "work")
    args = ["tools/run_demo.py", "--data-root", data, "--max-iters", "2", "--work-dir", work]
    proc = demo(args, "default_hooks.visualization.interval=1", cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    name, miou = LAST.match(proc.stdout.strip().splitlines()[-1]).groups()
    with open(osp.join(work, "demo_result.json")) as f:
        result = json.load(f)
    assert name == "HamHead-NMF" and f"{result['mIoU']:.1f}" == miou
    assert result["max_iters"] == 2 and result["seed"] == 0
    assert result["params"] > result["head_params"] > 0
    assert result["checkpoint"] == osp.join(work, "iter_2.pth") and osp.isfile(result["checkpoint"])
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = glob.glob(osp.join(work, "*", "vis_data", "events.out.tfevents.*"))
    scalars = EventAccumulator(events)
    scalars.Reload()
    assert {"loss", "lr", "mIoU"} <= set(scalars.Tags()["scalars"])
    assert len(glob.glob(osp.join(work, "*", "vis_data", "vis_image", "*.png"))) == 3


@pytest.mark.slow
def test_run_demo_stopped_by_a_signal_then_resumed(data, tmp_path):
    work = str(tmp_path / "work")
    args = [osp.join(REPO, "tools", "run_demo.py"), "--data-root", data, "--work-dir", work]
    args += ["--max-iters", "8", "--no-vis"]
    every3 = "default_hooks.checkpoint.interval=3"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(
        command(args, every3), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    seen = []
    for line in proc.stdout:  # until iteration 4 is logged
        seen.append(line)
        if re.search(r"Iter\(train\) \[4/8\]", line):
            proc.send_signal(signal.SIGTERM)
            break
    output = "".join(seen) + proc.communicate(timeout=600)[0]
    assert proc.returncode == 75, output[-3000:]
    step = int(re.search(r"stopped by SIGTERM after iteration (\d+)", output).group(1))
    assert 4 <= step < 8 and osp.isfile(osp.join(work, f"iter_{step}.pth"))
    assert osp.isfile(osp.join(work, "iter_3.pth"))  # the periodic one
    resumed = demo([*args, "--resume"], every3)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming at iteration {step}" in resumed.stdout + resumed.stderr
    assert LAST.match(resumed.stdout.strip().splitlines()[-1])
    assert torch.load(osp.join(work, "iter_8.pth"))["meta"]["iter"] == 8
    again = demo([*args, "--resume"], every3)  # nothing left to train
    assert again.returncode == 0 and LAST.match(again.stdout.strip().splitlines()[-1])
    assert "the run is complete" in again.stdout + again.stderr
