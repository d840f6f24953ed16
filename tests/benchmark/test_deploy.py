"""hamseg.benchmark.deploy: eager vs ONNX Runtime at equal threads, consistent numbers."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_deploy_latency_rows_and_table(tmp_path, monkeypatch):
    import torch

    from hamseg.apis import precision
    from hamseg.benchmark import deploy

    threads_seen = []
    rng = np.random.default_rng(0)  # two (input, ground truth) pairs: no dataset needed
    batches = [(rng.normal(size=(1, 3, 40, 40)).astype(np.float32), rng.integers(0, 7, (40, 40)))]
    monkeypatch.setattr(deploy, "val_batches", lambda model, n: batches * 2)
    monkeypatch.setattr(
        deploy,
        "onnx_session",
        lambda f, n: (
            threads_seen.append((n, torch.get_num_threads())),
            precision.onnx_session(f, n),
        )[1],
    )
    rows = deploy.latency(deploy.DEMO, 40, None, [1, 2], runs=2)
    backends = ["eager fp32", "ORT fp32", "ORT fp16", "ORT int8", "ORT int8-dynamic"]
    assert [(r["backend"], r["threads"]) for r in rows] == [
        (b, n) for n in (1, 2) for b in backends
    ]
    assert threads_seen == [(1, 1)] * 4 + [(2, 2)] * 4  # ORT's intra-op threads = torch's
    eager = {n: next(r for r in rows if r["threads"] == n)["ms"] for n in (1, 2)}
    for r in rows:
        assert r["min_ms"] <= r["ms"] <= r["max_ms"] and r["runs"] == 2 and r["val_images"] == 2
        assert r["ratio"] == pytest.approx(r["ms"] / eager[r["threads"]])
        assert 0 <= r["worst"] <= r["agreement"] <= 1
    assert rows[1]["agreement"] == 1.0 and rows[0]["miou"] == rows[1]["miou"]
    import runpy

    from tests.conftest import REPO

    markdown = runpy.run_path(f"{REPO}/tools/benchmark_deploy.py")["markdown"]
    table = markdown("demo", rows).splitlines()
    assert table[0].startswith("| model | backend | ms, 1 thr (min-max) | / eager | ms, 2 thr")
    assert len(table) == 2 + 5 and table[3].startswith("| demo 40 | ORT fp32 | ")
