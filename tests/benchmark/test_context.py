"""The context benchmark: the zoo, the targets, the log-log slope, and
tools/benchmark_context.py's table and sweep modes on tiny shapes in a fresh process (files and
numbers; timings are never asserted, they live in the benchmark's output, docs/).
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from tests.benchmark.tools import run_tool
from tools.lab.benchmark.context import evaluate_targets, loglog_slope
from tools.lab.benchmark.zoo import PAPER_SHAPE, PAPER_TABLE3, SPECS


def test_every_module_maps_the_tensor_to_its_positions():
    """C channels out, but APC (its merge: C/2) and DM (four C-wide branches: 4C)."""
    x = torch.randn(2, 16, 6, 7)
    channels = dict(apc=8, dm=64)
    for key, spec in SPECS.items():
        module = spec.build(16, 4, 2).eval()
        with torch.no_grad():
            assert module(x).shape == (2, channels.get(key, 16), 6, 7), key


def test_rows_with_a_table3_entry_have_its_parameter_count():
    """At C = 512 every row with a Table 3 entry (DA, APC, DM at its sizes) is within 1% of the
    paper's count (M = 2**20); A2 and ACF also by the hand count of their 1x1 convs."""
    for key, spec in SPECS.items():
        if spec.paper is None:
            continue
        params = sum(p.numel() for p in spec.build(512, 64, 6).parameters())
        assert params / 2**20 == pytest.approx(PAPER_TABLE3[spec.paper][0], rel=0.01), key
    conv = 512 * 512 + 512  # a 1x1 conv C -> C with bias
    a2 = sum(p.numel() for p in SPECS["a2"].build(512, 64, 6).parameters())
    assert a2 == 3 * conv + 512 * 512 + 2 * 512  # A, B, V with bias; W without, + BN
    acf = sum(p.numel() for p in SPECS["acf"].build(512, 64, 6).parameters())
    assert acf == 4 * (512 * 256 + 256) + 512 * 512 + 2 * 512  # phi psi rho gamma; out + BN


def test_double_attention_and_acf_average_when_their_maps_are_uniform():
    """Zero logits: A^2 gathers the mean feature and distributes it evenly (out = x + mean x
    with identity maps); ACF's aggregate is the mean of rho(x)."""
    from tools.lab.benchmark.comparators import CooccurrentFeatures, DoubleAttention

    torch.manual_seed(0)
    x = torch.randn(1, 3, 5, 4)
    a2 = DoubleAttention(3).eval()
    with torch.no_grad():
        for conv in (a2.features, a2.restore.conv):
            conv.weight.copy_(torch.eye(3).view(3, 3, 1, 1))
        for conv in (a2.gather, a2.distribute):
            conv.weight.zero_()
            conv.bias.zero_()
        a2.features.bias.zero_()
        out = a2(x)
    assert torch.allclose(out, x + x.mean(dim=(2, 3), keepdim=True), atol=1e-5)
    acf = CooccurrentFeatures(4).eval()
    x = torch.randn(1, 4, 3, 5)
    with torch.no_grad():
        for conv in (acf.phi, acf.psi):
            conv.weight.zero_()
        context = acf.rho(x).mean(dim=(2, 3), keepdim=True).expand(-1, -1, 3, 5)
        prior = acf.gamma(x.mean(dim=(2, 3), keepdim=True)).expand(-1, -1, 3, 5)
        expected = acf.out(torch.cat([context, prior], dim=1))
        assert torch.allclose(acf(x), expected, atol=1e-5)


def test_targets_are_evaluated():
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
    targets = {t["target"]: t for t in evaluate_targets(rows, PAPER_SHAPE)}
    assert targets["Ham (NMF) inference <= 1.2x compute floor"]["passed"]  # 1.1
    assert targets["Ham (NMF) fwd+bwd <= 0.5x mmseg Hamburger fwd+bwd"]["passed"]  # 0.4
    assert targets["Ham (NMF) fwd+bwd peak memory below mmseg Hamburger's"]["passed"]
    assert not targets["Ham (NMF) fwd+bwd >= 10x faster than SA"]["passed"]  # 7.5x
    assert targets["Ham (NMF) params 0.50M"]["passed"]
    assert not targets["Ham (CD) params 0.50M"]["passed"]  # 0.51M
    assert targets["Ham (NMF) MACs within 5% of 17.6G"]["passed"]
    assert not targets["Ham (CD) MACs within 5% of 16.2G"]["passed"]  # +5.6%
    rows["ham_nmf"]["infer_x_floor"] = 1.25
    first = evaluate_targets(rows, PAPER_SHAPE)[0]
    assert first["value"] == 1.25 and not first["passed"]
    assert len(evaluate_targets(rows, (1, 8, 4, 4))) == 4  # no paper rows off-setting


def test_table_mode_writes_its_files(tmp_path):
    out = tmp_path / "out"
    modules = ["ham_nmf", "mmseg_ham", "sa", "polynl"]
    args = ["--shape", "1", "16", "8", "8", "--rank", "4", "--steps", "2", "--runs", "2"]
    args += ["--warmup", "0", "--rate-size", "64", "--out-dir", str(out), "--modules", *modules]
    printed = run_tool("benchmark_context.py", *args).stdout
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
    env = saved["env"]
    assert env["threads"] == 2 and env["rate"] == max(env["rate_start"], env["rate_end"]) > 0
    for row in rows.values():
        assert row["infer_ms"] > 0 and row["train_ms"] > 0
        assert row["infer_floor_ms"] == pytest.approx(1e3 * 2 * row["macs"] / env["rate"])
        assert row["train_mem_mb"] > 0
        assert row["infer_runs"] == row["train_runs"] == 2
        for part in ("infer", "train"):  # the median and spread of the runs it reports
            runs = row[f"{part}_ms_all"]
            assert len(runs) == 2 and row[f"{part}_ms"] == pytest.approx(sum(runs) / 2)
            assert row[f"{part}_spread"] == pytest.approx((max(runs) - min(runs)) / (sum(runs) / 2))
    assert len(saved["targets"]) == 4
    text = (out / "benchmark_context.md").read_text()
    assert "| Ham (NMF) |" in text and "| spread |" in text and "| Target |" in text
    # printed: a progress line per module, the report, the files written
    built = [
        line.split()[1] for line in printed.splitlines() if line.endswith(": built and counted")
    ]
    assert built == [f"{m}:" for m in modules]
    assert f"timing {len(modules)} modules in turn, 2 runs each" in printed
    assert text in printed
    base = out / "benchmark_context"
    assert printed.rstrip().endswith(f"[benchmark] wrote {base}.md, {base}.json, {base}.png")


def test_loglog_slope_is_the_exponent():
    assert loglog_slope([(n, 3.0 * n**1.5) for n in (64, 256, 1024)]) == pytest.approx(1.5)
    assert loglog_slope([(64, 2.0), (256, 8.0)]) == pytest.approx(1.0)
    noisy = [(64, 1.0), (256, 4.0 * math.e**0.1), (1024, 16.0)]  # a middle point off the line
    assert loglog_slope(noisy) == pytest.approx(1.0, abs=1e-12)
    assert loglog_slope([(64, 1.0), (64, 5.0)]) == 0.0


def test_sweep_mode_fits_slopes_and_guards_quadratic_memory(tmp_path):
    out = tmp_path / "sweep"
    args = ["--sweep", "--shape", "1", "8", "0", "0", "--sizes", "8", "16", "--rank", "4"]
    args += ["--steps", "2", "--runs", "1", "--warmup", "0", "--out-dir", str(out)]
    args += ["--modules", "ham_nmf", "sa", "--max-pairwise-gb", "1e-6"]
    printed = run_tool("benchmark_context.py", *args).stdout
    for ext in ("md", "json", "png"):
        assert (out / f"benchmark_sweep.{ext}").exists()
    result = json.loads((out / "benchmark_sweep.json").read_text())
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
    for metric, slope in result["slopes"]["ham_nmf"].items():
        points = [(p["n"], p[metric]) for p in ham]
        assert slope == pytest.approx(loglog_slope(points)), metric
    assert "[sweep] sa H=W=8: skipped (n^2 maps need ~0.0 GB > --max-pairwise-gb 1e-06)" in printed
    assert (out / "benchmark_sweep.md").read_text() in printed
