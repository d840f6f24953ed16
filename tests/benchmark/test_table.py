"""Table mode of tools/benchmark_context.py on a tiny shape, in a fresh process: files, numbers.

Correctness only: timings are not asserted (they live in the benchmark's output, docs/).
"""

from __future__ import annotations

import json

from tests.benchmark.tools import run_tool


def test_table_mode_writes_its_files(tmp_path):
    out = tmp_path / "out"
    modules = ["ham_nmf", "mmseg_ham", "sa", "polynl"]
    args = ["--shape", "1", "16", "8", "8", "--rank", "4", "--steps", "2", "--runs", "2"]
    args += ["--warmup", "0", "--rate-size", "64", "--out-dir", str(out), "--modules", *modules]
    args += ["--retries", "0"]  # fast on a loaded machine; retries: tests/benchmark/test_timing.py
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
    for row in rows.values():
        assert row["infer_ms"] > 0 and row["train_ms"] > 0
        assert row["infer_floor_ms"] > 0 and row["train_mem_mb"] > 0
        assert row["infer_runs"] == row["train_runs"] == 2
    assert saved["env"]["threads"] == 2 and saved["env"]["rate"] > 0
    assert len(saved["targets"]) == 4
    text = (out / "benchmark_context.md").read_text()
    assert "| Ham (NMF) |" in text and "Others' CPU" in text and "| Target |" in text
    assert all(row["infer_other_cpu"] >= 0 for row in rows.values())
    # printed: a progress line per module, the report, the files written
    assert [line.split()[1] for line in printed.splitlines() if line.endswith(") ...")] == modules
    assert text in printed
    base = out / "benchmark_context"
    assert printed.rstrip().endswith(f"[benchmark] wrote {base}.md, {base}.json, {base}.png")
