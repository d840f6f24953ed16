"""hamseg.apis.demo and tools/run_demo.py: a short demo training through mmseg's real pipeline."""

from __future__ import annotations

import glob
import json
import os.path as osp
import re
import subprocess
import sys

from mmengine.config import Config

from hamseg.apis.demo import head_config, set_schedule_length
from hamseg.datasets.context_shapes import ContextShapesConfig, is_generated
from tests.conftest import REPO
from tests.helpers import DEMO_NMF


def test_set_schedule_length_rescales_schedulers():
    cfg = Config.fromfile(DEMO_NMF)
    old = cfg.train_cfg.max_iters
    set_schedule_length(cfg, 30)
    assert cfg.train_cfg.max_iters == 30 and cfg.train_cfg.val_interval == 30
    assert cfg.default_hooks.checkpoint.interval == 30
    warm, poly = cfg.param_scheduler
    assert warm["end"] == 3 and poly["begin"] == 3 and poly["end"] == 30
    cfg = Config.fromfile(DEMO_NMF)
    set_schedule_length(cfg, old)
    assert cfg.param_scheduler[0]["end"] == 20 and cfg.param_scheduler[1]["end"] == old


def test_head_config_takes_the_data_configs_imports_after_its_own(tmp_path):
    data = tmp_path / "my_data.py"
    data.write_text(
        f"_base_ = [{osp.join(REPO, 'configs', '_base_', 'datasets', 'context_shapes.py')!r}]\n"
        "custom_imports = dict(imports=['colorsys', 'hamseg'])\n"
    )
    cfg = head_config(DEMO_NMF, str(data))
    assert cfg.custom_imports == dict(imports=["hamseg", "colorsys"], allow_failed_imports=False)
    assert head_config(DEMO_NMF).custom_imports.imports == ["hamseg"]  # without a data config


def test_short_demo_run_end_to_end(tmp_path):
    """Generates data, trains 4 iterations with the Runner, validates, prints the final line and
    leaves a checkpoint, TensorBoard scalars (loss, lr, mIoU) and validation prediction images."""
    data, work = str(tmp_path / "cs"), str(tmp_path / "work")
    cmd = [
        sys.executable,
        "tools/run_demo.py",
        "--data-root",
        data,
        "--data-size",
        "64",
        "--num-train",
        "8",
        "--num-val",
        "3",
        "--max-iters",
        "4",
        "--work-dir",
        work,
        "--json-out",
        str(tmp_path / "res.json"),
        "--cfg-options",
        "default_hooks.visualization.interval=1",
        "train_dataloader.num_workers=0",
        "train_dataloader.persistent_workers=False",
        "val_dataloader.num_workers=0",
        "val_dataloader.persistent_workers=False",
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    m = re.fullmatch(r"HamHead-NMF demo: val mIoU = (\d+\.\d)", last)
    assert m, last
    assert is_generated(data, ContextShapesConfig(size=64, num_train=8, num_val=3))
    with open(tmp_path / "res.json") as f:
        res = json.load(f)
    assert f"{res['mIoU']:.1f}" == m.group(1) and 0 <= res["mIoU"] <= 100
    assert res["max_iters"] == 4 and res["seed"] == 0 and res["params"] > res["head_params"] > 0
    assert osp.isfile(osp.join(work, "iter_4.pth")) and res["checkpoint"].endswith("iter_4.pth")

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = glob.glob(osp.join(work, "*", "vis_data", "events.out.tfevents.*"))
    assert len(events) == 1
    acc = EventAccumulator(events[0])
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"loss", "lr", "mIoU"} <= tags, tags
    vis = glob.glob(osp.join(work, "*", "vis_data", "vis_image", "*.png"))
    assert len(vis) == 3  # one image|prediction picture per validation image
