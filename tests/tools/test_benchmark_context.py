"""tools/benchmark_context.py (and tools/benchmark_model.py) on tiny shapes: files, numbers.

Correctness only: timings are not asserted (they live in the benchmark's output, docs/).
"""

from __future__ import annotations

import importlib.util
import json
import os.path as osp
import sys

import pytest
import torch

from tests.conftest import REPO

MIB = 2**20


def load_tool(name):
    spec = importlib.util.spec_from_file_location(name, osp.join(REPO, "tools", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    return load_tool("benchmark_context")


def test_every_module_maps_the_tensor_to_its_shape(bench):
    x = torch.randn(2, 16, 6, 7)
    for key, spec in bench.SPECS.items():
        module = spec.build(16, 4, 2).eval()
        with torch.no_grad():
            assert module(x).shape == x.shape, key


def test_hand_count_at_the_paper_setting(bench):
    """Table 3: 17.6G (NMF) and 16.2G (CD) MACs for one 1x512x128x128 tensor, d=512, r=64."""
    nmf = bench.hamburger_macs((1, 512, 128, 128), "NMF", 64, 6)
    cd = bench.hamburger_macs((1, 512, 128, 128), "CD", 64, 6)
    assert nmf["conv"] == 2 * 512 * 512 * 128 * 128
    assert nmf["total"] == 17_542_676_480  # + 8,388,608 BN elements in the library count
    assert abs(nmf["total"] / 17.6e9 - 1) < 0.01
    assert abs(cd["total"] / 16.2e9 - 1) < 0.01


@pytest.mark.parametrize("key", ["ham_nmf", "ham_cd", "ham_vq", "ham_nmf_release", "mmseg_ham"])
def test_library_count_equals_hand_count(bench, key):
    x = torch.randn(2, 32, 33, 33)  # above the Hamburger's fast-path threshold (32 x 32)
    module = bench.SPECS[key].build(32, 8, 3)
    total, by_op = bench.count_macs(module, x)
    kind, variant = bench.SPECS[key].ham[:2] if bench.SPECS[key].ham else ("NMF", "paper")
    # hamseg's ham runs in place ('module' path); mmseg's NMF2D computes what the paper writes
    path = "paper" if key == "mmseg_ham" else "module"
    hand = bench.hamburger_macs(tuple(x.shape), kind, 8, 3, variant, path=path)
    assert sum(by_op.get(op, 0) for op in bench.PRODUCT_OPS) == hand["total"]
    assert total >= hand["total"]  # + the norms (one MAC per element)


def test_peak_memory_sees_a_temporary(bench):
    def work():
        a = torch.ones(2 * MIB)  # 8 MiB, freed before b is allocated
        del a
        b = torch.ones(MIB // 2)  # 2 MiB
        return b.sum()

    peak = bench.peak_memory(work, torch.device("cpu"))
    assert 8 * MIB <= peak < 9 * MIB


def test_other_cpu_is_measured(bench):
    with bench.OtherCPU() as other:
        sum(i * i for i in range(200_000))  # our own work is not counted
    assert other.cores >= 0
    assert bench.wait_for_quiet(threshold=1e9, max_wait=0, probe=0.05) >= 0


def test_targets_are_evaluated(bench):
    rows = {
        "ham_nmf": dict(
            infer_x_floor=1.1,
            infer_ms=11.0,
            infer_floor_ms=10.0,
            train_ms=40.0,
            train_mem_mb=10.0,
            params=525_824,
            macs=17.55e9,
        ),
        "mmseg_ham": dict(train_ms=100.0, train_mem_mb=20.0),
        "sa": dict(train_ms=300.0),
        "ham_cd": dict(params=525_824 + 2**20 // 100, macs=17.1e9),
    }
    targets = {t["target"]: t for t in bench.evaluate_targets(rows, bench.PAPER_SHAPE)}
    assert targets["Ham (NMF) inference <= 1.2x compute floor"]["passed"]  # 1.1
    assert targets["Ham (NMF) fwd+bwd <= 0.5x mmseg Hamburger fwd+bwd"]["passed"]  # 0.4
    assert targets["Ham (NMF) fwd+bwd peak memory below mmseg Hamburger's"]["passed"]
    assert not targets["Ham (NMF) fwd+bwd >= 10x faster than SA"]["passed"]  # 7.5x
    assert targets["Ham (NMF) params 0.50M"]["passed"]
    assert not targets["Ham (CD) params 0.50M"]["passed"]  # 0.51M
    assert targets["Ham (NMF) MACs within 5% of 17.6G"]["passed"]
    assert not targets["Ham (CD) MACs within 5% of 16.2G"]["passed"]  # +5.6%
    rows["ham_nmf"]["infer_x_floor"] = 1.25
    first = bench.evaluate_targets(rows, bench.PAPER_SHAPE)[0]
    assert first["value"] == 1.25 and not first["passed"]
    assert len(bench.evaluate_targets(rows, (1, 8, 4, 4))) == 4  # no paper rows off-setting


def test_table_mode_writes_its_files(bench, tmp_path):
    out = tmp_path / "out"
    modules = ["ham_nmf", "mmseg_ham", "sa", "polynl"]
    args = ["--shape", "1", "16", "8", "8", "--rank", "4", "--steps", "2", "--runs", "2"]
    args += ["--warmup", "0", "--rate-size", "64", "--out-dir", str(out), "--modules", *modules]
    result = bench.main(args)
    for ext in ("md", "json", "png"):
        assert (out / f"benchmark_context.{ext}").stat().st_size > 100
    assert (out / "benchmark_context.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((out / "benchmark_context.json").read_text())
    rows = {r["key"]: r for r in saved["rows"]}
    assert list(rows) == modules
    c = 16
    assert rows["ham_nmf"]["params"] == (c * c + c) + c * c + 2 * c  # breads + BN
    assert rows["polynl"]["params"] == 3 * c * c + 2
    assert rows["sa"]["params"] == 4 * (c * c + c)  # g, theta, phi, out: 1x1 convs with bias
    assert rows["ham_nmf"]["macs_hand_rel_diff"] == 0
    assert rows["sa"]["macs"] > 0 and rows["sa"]["train_flops"] > 2 * rows["sa"]["macs"]
    for row in rows.values():
        assert row["infer_ms"] > 0 and row["train_ms"] > 0
        assert row["infer_floor_ms"] > 0 and row["train_mem_mb"] > 0
        assert row["infer_runs"] == row["train_runs"] == 2
    assert saved["env"]["threads"] == 2 and saved["env"]["rate"] > 0
    assert len(result["targets"]) == 4
    text = (out / "benchmark_context.md").read_text()
    assert "| Ham (NMF) |" in text and "Others' CPU" in text and "| Target |" in text
    assert all(row["infer_other_cpu"] >= 0 for row in rows.values())


def test_sweep_mode_fits_slopes_and_guards_quadratic_memory(bench, tmp_path):
    out = tmp_path / "sweep"
    args = ["--sweep", "--shape", "1", "8", "0", "0", "--sizes", "8", "16", "--rank", "4"]
    args += ["--steps", "2", "--runs", "1", "--warmup", "0", "--out-dir", str(out)]
    args += ["--modules", "ham_nmf", "sa", "--max-pairwise-gb", "1e-6"]
    result = bench.main(args)
    for ext in ("md", "json", "png"):
        assert (out / f"benchmark_sweep.{ext}").exists()
    sa = [p for p in result["points"] if p["key"] == "sa"]
    ham = [p for p in result["points"] if p["key"] == "ham_nmf"]
    assert [p["n"] for p in ham] == [64, 256] and all("infer_ms" in p for p in ham)
    assert all("skipped" in p for p in sa)  # 3 * n^2 * 4 bytes > 1e-6 GB
    assert set(result["slopes"]["ham_nmf"]) == {
        "infer_ms",
        "train_ms",
        "infer_mem_mb",
        "train_mem_mb",
    }


def test_model_benchmark_reports_the_ratio(tmp_path):
    tool = load_tool("benchmark_model")
    configs = ["tests/data/tiny_ham.py", "tests/data/tiny_fcn.py"]
    args = ["--configs", *configs, "--labels", "ham", "fcn", "--size", "33", "--iters", "1"]
    result = tool.main([*args, "--warmup", "0", "--out-dir", str(tmp_path)])
    rows = result["rows"]
    assert [r["label"] for r in rows] == ["ham", "fcn"]
    assert rows[0]["ratio_to_first"] == 1.0
    assert rows[1]["ratio_to_first"] == rows[1]["iter_s"] / rows[0]["iter_s"]
    assert all(r["peak_mem_mb"] > 0 and r["params"] > 0 for r in rows)
    saved = json.loads((tmp_path / "benchmark_model.json").read_text())
    assert saved["env"]["size"] == 33 and len(saved["rows"]) == 2
    assert "| ham |" in (tmp_path / "benchmark_model.md").read_text()


@pytest.mark.parametrize(
    "key", ["ham_nmf", "ham_nmf_bptt", "ham_cd", "ham_vq", "ham_nmf_release", "ham_vq_bptt"]
)
def test_run_count_equals_hand_count_of_the_inference_path(bench, key):
    """What the timed inference call runs (no module hooks: the fast path) is counted, and it
    is the hand count of the reassociated path; below the fast-path threshold, the full one."""
    module = bench.SPECS[key].build(32, 8, 3)
    kind, variant = bench.SPECS[key].ham[:2]
    x = torch.randn(2, 32, 33, 33)
    fast = bench.hamburger_macs(tuple(x.shape), kind, 8, 3, variant, path="fast")
    calls = bench.hamburger_macs(tuple(x.shape), kind, 8, 3, variant, path="module")
    assert bench.count_run_macs(module, x) == fast["total"] < calls["total"]
    small = torch.randn(1, 32, 9, 11)
    assert (
        bench.count_run_macs(module, small)
        == bench.hamburger_macs(tuple(small.shape), kind, 8, 3, variant, path="module")["total"]
    )


def test_paths_of_the_hand_count(bench):
    """'module' drops NMF's repeated X^T D (n d r); 'fast' also trades W (D C) for (W D) C."""
    shape, (n, d, r, c) = (1, 512, 128, 128), (128 * 128, 512, 64, 512)
    paper = bench.hamburger_macs(shape, "NMF", r, 6)["total"]
    module = bench.hamburger_macs(shape, "NMF", r, 6, path="module")["total"]
    fast = bench.hamburger_macs(shape, "NMF", r, 6, path="fast")["total"]
    assert paper - module == n * d * r
    assert module - fast == (d * r * n + c * d * n) - (c * d * r + c * r * n)
    cd = bench.hamburger_macs(shape, "CD", r, 6)["total"]
    assert bench.hamburger_macs(shape, "CD", r, 6, path="module")["total"] == cd
    with pytest.raises(ValueError, match="path"):
        bench.hamburger_macs(shape, "NMF", r, 6, path="other")


def test_a_slowed_down_timing_is_repeated(bench, monkeypatch):
    """A timing bracketed by a probe at half the best speed (another tenant of the VM) is
    repeated; the undisturbed attempt is kept and its speed reported."""
    probes = iter([100.0, 50.0, 100.0, 98.0])
    monkeypatch.setattr(bench, "probe_rate", lambda device: next(probes))
    monkeypatch.setattr(bench, "OtherCPU", _NoOthers)
    st = bench.Settings((1, 1, 1, 1), torch.device("cpu"), 1, 1, 3, 0, 10.0, retries=2)
    calls = []
    times, others, speed = bench.timed(lambda: calls.append(1), st)
    assert len(calls) == 6 and len(times) == 3  # two attempts of 3 runs, the second kept
    assert (others, speed) == (0.0, 0.98) and st.probe_best == 100.0
    st = bench.Settings((1, 1, 1, 1), torch.device("cpu"), 1, 1, 3, 0, 10.0, retries=0)
    probes = iter([100.0, 50.0])
    assert bench.timed(lambda: None, st)[2] == 0.5  # no retries: reported, not repeated


class _NoOthers:
    cores = 0.0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None
