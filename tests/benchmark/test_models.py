"""Whole models: the model built for training and its synthetic batch; tools/benchmark_model.py
and tools/benchmark_train_iter.py on tiny configs in a fresh process (rows, ratios, files; the
full ResNet-101 ham_voc iteration at 513x513 is slow); the SegNeXt head comparison.
"""

from __future__ import annotations

import json
import math
import os
import os.path as osp
import subprocess
import sys

import pytest
import torch

from tests.benchmark.tools import run_tool
from tests.conftest import REPO, TINY_FCN
from tests.helpers import one_thread  # noqa: F401  (fixture)
from tools.lab.benchmark.models import (
    HAM,
    build_for_training,
    compare_segnext,
    default_label,
    resolve,
    segnext_markdown,
    segnext_pair,
    synthetic_batch,
    train_iter_summary,
)


def test_synthetic_batch_is_what_the_loader_yields():
    data = synthetic_batch(2, 33, num_classes=3, seed=1)
    assert len(data["inputs"]) == len(data["data_samples"]) == 2
    for image, sample in zip(data["inputs"], data["data_samples"]):
        assert image.dtype == torch.uint8 and image.shape == (3, 33, 33)
        label = sample.gt_sem_seg.data
        assert label.shape == (1, 33, 33)
        values = set(label.unique().tolist())
        assert values <= {0, 1, 2, 255} and 255 in values
        assert 0.01 < (label == 255).float().mean().item() < 0.1  # 5% ignored
        assert sample.metainfo["pad_shape"] == (33, 33)
    again = synthetic_batch(2, 33, num_classes=3, seed=1)
    assert torch.equal(again["inputs"][1], data["inputs"][1])


SYNC_BN = dict(type="SyncBN", requires_grad=True)
AUX_CONFIG = f"""_base_ = [{TINY_FCN!r}]
model = dict(
    pretrained="open-mmlab://resnet18_v1c",
    backbone=dict(norm_cfg={SYNC_BN!r}),
    auxiliary_head=dict(type="FCNHead", in_channels=64, in_index=0, channels=8, num_convs=1,
                        concat_input=False, num_classes=3, norm_cfg={SYNC_BN!r}),
)
"""


def test_build_for_training_as_a_one_process_run(tmp_path):
    """Pretrained weights off (nothing is downloaded), SyncBN reverted to BN, padding to the
    given size, the config's optimizer, the auxiliary head kept or dropped; one train step runs
    on the synthetic batch."""
    config = tmp_path / "aux.py"
    config.write_text(AUX_CONFIG)
    model, optim_wrapper, cfg = build_for_training(str(config), 21, torch.device("cpu"))
    assert model.training and model.data_preprocessor.size == (21, 21)
    assert model.with_auxiliary_head
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    assert norms and not any(isinstance(m, torch.nn.SyncBatchNorm) for m in norms)
    assert type(optim_wrapper.optimizer).__name__ == cfg.optim_wrapper.optimizer.type == "SGD"
    batch = synthetic_batch(1, 21, model.decode_head.num_classes)
    log_vars = model.train_step(batch, optim_wrapper)
    assert torch.isfinite(log_vars["loss"]) and "aux.loss_ce" in log_vars
    model, _, _ = build_for_training(str(config), 21, torch.device("cpu"), no_aux=True)
    assert not model.with_auxiliary_head


def test_relative_configs_are_in_the_checkout():
    assert resolve("tests/data/tiny_fcn.py") == TINY_FCN == resolve(TINY_FCN)
    mmseg_config = resolve("mmseg::nonlocal_net/nonlocal_r101-d8_4xb4-40k_voc12aug-512x512.py")
    assert os.path.isfile(mmseg_config) and "/.mim/configs/nonlocal_net/" in mmseg_config


def test_model_benchmark_reports_the_ratio(tmp_path):
    configs = ["tests/data/tiny_ham.py", "tests/data/tiny_fcn.py"]
    args = ["--configs", *configs, "--labels", "ham", "fcn", "--size", "33", "--iters", "2"]
    printed = run_tool("benchmark_model.py", *args, "--warmup", "0", "--out-dir", str(tmp_path))
    result = json.loads((tmp_path / "benchmark_model.json").read_text())
    rows = result["rows"]
    assert [r["label"] for r in rows] == ["ham", "fcn"]
    assert rows[0]["ratio_to_first"] == 1.0
    assert rows[1]["ratio_to_first"] == rows[1]["iter_s"] / rows[0]["iter_s"]
    assert all(r["peak_mem_mb"] > 0 and r["params"] > 0 for r in rows)
    for r in rows:
        assert len(r["iter_s_all"]) == 2 and r["iter_s"] == pytest.approx(sum(r["iter_s_all"]) / 2)
        lo, hi = min(r["iter_s_all"]), max(r["iter_s_all"])
        assert r["spread"] == pytest.approx((hi - lo) / r["iter_s"])
    assert result["env"]["size"] == 33 and result["env"]["iters"] == 2
    text = (tmp_path / "benchmark_model.md").read_text()
    assert "| ham |" in text and "| spread |" in text and text in printed.stdout
    base = tmp_path / "benchmark_model"
    assert printed.stdout.rstrip().endswith(f"[benchmark_model] wrote {base}.md, {base}.json")


def test_default_labels():
    assert default_label(HAM) == "HamNet (HamHead NMF)"
    assert default_label("mmseg::nonlocal_net/nonlocal_r101-d8.py") == "nonlocal_r101-d8"


@pytest.mark.parametrize("tool", ["benchmark_model.py", "benchmark_train_iter.py"])
def test_a_missing_config_is_one_line_before_any_measurement(tmp_path, tool):
    missing = str(tmp_path / "nope.py")
    cmd = [sys.executable, osp.join(REPO, "tools", tool)]
    if tool == "benchmark_model.py":
        cmd += ["--configs", "tests/data/tiny_ham.py", missing, "--out-dir", str(tmp_path / "o")]
    else:
        cmd += [missing]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: config file not found: {missing}"
    assert "[benchmark_model]" not in result.stdout and not (tmp_path / "o").exists()


def test_tiny_train_iterations(tmp_path):
    """In a fresh process, so that its peak RSS is the iteration's."""
    out = tmp_path / "bench.json"
    args = ["tests/data/tiny_ham.py", "--size", "33", "--batch-size", "2", "--iters", "2"]
    printed = run_tool("benchmark_train_iter.py", *args, "--threads", "1", "--out", str(out))
    report = json.loads(out.read_text())
    assert report["config"] == osp.join("tests", "data", "tiny_ham.py")
    assert (report["batch_size"], report["size"], report["iters"]) == (2, 33, 2)
    assert report["threads"] == 1 and len(report["seconds_per_iter"]) == 2
    assert (report["device"], report["precision"], report["peak_cuda_mib"]) == ("cpu", "fp32", None)
    assert len(report["head_seconds"]) == 2 and all(t > 0 for t in report["head_seconds"])
    assert all(math.isfinite(v) and abs(v - math.log(3)) < 0.5 for v in report["loss"])
    assert report["peak_rss_mib"] >= report["rss_before_mib"] > 0
    assert printed.stdout == train_iter_summary(report) + "\n"
    assert printed.stdout.splitlines()[1] == "batch x size           2 x 33x33"


@pytest.mark.slow
def test_full_size_train_iteration(tmp_path):
    """The full ResNet-101 ham_voc model at 513x513 on CPU; prints the time and peak memory
    (``pytest -s`` or ``-rP``); docs/recipes.md records a measured run."""
    out = tmp_path / "bench.json"
    args = ["configs/ham_voc.py", "--size", "513", "--iters", "1", "--out", str(out)]
    result = run_tool("benchmark_train_iter.py", *args, timeout=3600)
    report = json.loads(out.read_text())
    print("\n" + result.stdout)
    assert (report["batch_size"], report["size"], report["iters"]) == (2, 513, 1)
    assert report["params_m"] == pytest.approx(54.04, abs=0.01)  # R101 deep stem + HamHead V2
    loss = report["loss"][0]
    assert math.isfinite(loss) and abs(loss - math.log(21)) < 1.0  # random init, 21 classes
    assert report["peak_rss_mib"] > report["rss_before_mib"] > 0
    assert report["seconds_per_iter"][0] > 0


@pytest.mark.usefixtures("one_thread")
def test_the_segnext_pair_has_the_same_weights_and_only_the_head_type_differs():
    ours, theirs = segnext_pair()
    assert type(ours.decode_head).__name__ == "HamLightHead"
    assert type(theirs.decode_head).__name__ == "LightHamHead"
    a, b = ours.state_dict(), theirs.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.usefixtures("one_thread")
def test_compare_segnext_reports_ratios_of_its_own_medians():
    result = compare_segnext(batch=1, size=64, runs=1)
    assert [r["part"] for r in result["rows"]] == [
        "ham (NMF, r=16, 6 steps)",
        "decode head",
        "whole model, one iteration",
    ]
    for r in result["rows"]:
        assert r["time_ratio"] == pytest.approx(r["time_ours"] / r["time_mmseg"])
        assert r["mem_ratio"] == pytest.approx(r["mem_ours"] / r["mem_mmseg"])
        assert r["mem_ours"] > 0 and r["mem_mmseg"] > 0 and r["spread"] == 0.0  # one run
    table = segnext_markdown(result)
    assert "| decode head |" in table and "1x3x64x64" in table and "cpu" in table
