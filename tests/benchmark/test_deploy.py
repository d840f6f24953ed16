"""tools.lab.benchmark.deploy: eager vs ONNX Runtime at equal threads, consistent numbers, ORT's
per-operator profile and the eval_draws table."""

from __future__ import annotations

import runpy

import numpy as np
import pytest

from tests.conftest import REPO
from tests.helpers import one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def two_val_images(monkeypatch):
    """Two (input, ground truth) pairs of 40x40 instead of the config's val split, one of
    them for calibration."""
    from tools.lab.benchmark import deploy

    rng = np.random.default_rng(0)
    batches = [(rng.normal(size=(1, 3, 40, 40)).astype(np.float32), rng.integers(0, 7, (40, 40)))]
    monkeypatch.setattr(deploy, "val_batches", lambda model, n: batches * 2)
    monkeypatch.setattr(deploy, "calibration_inputs", lambda model: ([batches[0][0]], "train"))


def test_deploy_latency_rows_profile_and_table(monkeypatch, two_val_images):
    import torch

    from tools.deploy import precision
    from tools.lab.benchmark import deploy

    threads_seen = []

    def session(f, n):
        threads_seen.append((n, torch.get_num_threads()))
        return precision.onnx_session(f, n)

    monkeypatch.setattr(deploy, "onnx_session", session)
    result = deploy.latency(deploy.DEMO, 40, None, [1, 2], runs=2, profile_runs=1)
    rows = result["rows"]
    backends = ["eager fp32", "ORT fp32", "ORT fp16", "ORT int8", "ORT int8-dynamic"]
    assert [(r["backend"], r["threads"]) for r in rows] == [
        (b, n) for n in (1, 2) for b in backends
    ]
    assert threads_seen == [(1, 1)] * 4 + [(2, 2)] * 4  # ORT's intra-op threads = torch's
    eager = {n: next(r for r in rows if r["threads"] == n)["ms"] for n in (1, 2)}
    ort = {
        n: next(r for r in rows if r["threads"] == n and r["backend"] == "ORT fp32") for n in (1, 2)
    }
    for r in rows:
        assert r["min_ms"] <= r["ms"] <= r["max_ms"] and r["runs"] == 2 and r["val_images"] == 2
        assert r["ratio"] == pytest.approx(r["ms"] / eager[r["threads"]])
        assert r["ratio_ort"] == pytest.approx(r["ms"] / ort[r["threads"]]["ms"])
        assert r["cpu_ratio_ort"] == pytest.approx(r["cpu_ms"] / ort[r["threads"]]["cpu_ms"])
        # the process's CPU time of a call: at most every thread busy for the slowest call
        assert 0 < r["cpu_ms"] <= (r["threads"] + 1) * r["max_ms"]
        assert 0 <= r["worst"] <= r["agreement"] <= 1
    assert rows[1]["agreement"] == 1.0 and rows[0]["miou"] == rows[1]["miou"]
    profiles = result["profiles"]
    assert list(profiles) == ["fp32", "int8"]
    for ops in profiles.values():
        assert sum(o["share"] for o in ops) == pytest.approx(1)
        assert all(o["ms"] >= 0 and o["nodes"] >= 1 for o in ops)
        assert any(o["op"].endswith(" (ham)") for o in ops)  # the ham's nodes apart
    assert "QLinearConv" in {o["op"] for o in profiles["int8"]}
    tool = runpy.run_path(f"{REPO}/tools/benchmark_deploy.py")
    table = tool["markdown"]("demo", rows).splitlines()
    assert table[0].startswith(
        "| model | backend | ms, 1 thr (min-max) | / eager | / ORT fp32 | CPU ms | CPU / ORT fp32 |"
    )
    assert len(table) == 2 + 5 and table[3].startswith("| demo 40 | ORT fp32 | ")
    profile = tool["profile_markdown"]("demo", profiles).splitlines()
    assert profile[2].startswith("| ORT fp32 | all kernels | ")


def test_a_model_without_val_split_is_timed_with_random_calibration():
    from tools.lab.benchmark import deploy

    result = deploy.latency(
        deploy.DEMO, 40, None, [1], runs=2, backends=["ORT fp32", "ORT int8"], quality=False
    )
    assert [r["backend"] for r in result["rows"]] == ["ORT fp32", "ORT int8"]
    assert all(r["miou"] is None and r["val_images"] == 0 for r in result["rows"])
    assert result["rows"][0]["ratio_ort"] == 1


def test_the_draws_table_times_every_graph_and_spans_the_seeds(two_val_images):
    from tools.lab.benchmark import deploy

    rows = deploy.draws_table(deploy.DEMO, 40, None, draws=(1, 3), seeds=3, runs=2)
    assert [r["draws"] for r in rows] == [1, 3]
    for r in rows:
        assert r["seeds"] == 3 and r["val_images"] == 2 and r["runs"] == 2
        assert r["miou_min"] <= r["miou"] <= r["miou_max"]  # the graph is eval_seed 0's model
        assert r["miou_min"] <= r["miou_mean"] <= r["miou_max"]
        for p in ("fp32", "int8"):
            assert r[f"{p}_min_ms"] <= r[f"{p}_ms"] <= r[f"{p}_max_ms"] and r[f"{p}_cpu_ms"] > 0
    table = runpy.run_path(f"{REPO}/tools/benchmark_deploy.py")["draws_markdown"]("demo", rows)
    assert table.splitlines()[2].startswith("| eval_draws=1 | ")


def test_the_recipe_table_times_each_int8_variant_against_ort_fp32(two_val_images):
    from tools.lab.benchmark import deploy

    rows = deploy.recipe_table(deploy.DEMO, 40, None, ["shipped", "QDQ format"], runs=2)
    assert [r["recipe"] for r in rows] == ["ORT fp32", "shipped", "QDQ format"]
    assert rows[0]["ratio_ort"] == rows[0]["cpu_ratio_ort"] == 1 and rows[0]["agreement"] == 1
    for r in rows:
        assert r["min_ms"] <= r["ms"] <= r["max_ms"] and r["cpu_ms"] > 0
        assert 0 <= r["worst"] <= r["agreement"] <= 1 and 0 <= r["miou"] <= 100
    table = runpy.run_path(f"{REPO}/tools/benchmark_deploy.py")["recipes_markdown"]("demo", rows)
    assert table.splitlines()[3].startswith("| shipped | ")
