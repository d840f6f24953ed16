"""The head comparison: heads and variants, one protocol for every ham, the report's tests
(within one backbone and one machine, Holm-adjusted) from stored runs, bad input, the screen's
verdict; a tiny comparison and the screen's dry run, trained (slow)."""

import json
import os.path as osp
import subprocess
import sys

import pytest

from hamseg.cli import run_cli
from hamseg.utils.errors import UsageError
from projects.context_lab.context_lab import compare as C
from projects.context_lab.context_lab import screen

REPO = osp.dirname(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))


def run(key, kind, seed, value, machine="GPU A", backbone="ResNetV1c-18"):
    ev = dict(deterministic=value)
    if kind == "ham":
        ev = dict(paper=[value - 1, value + 1], ensemble=value + 0.5)
    return dict(
        key=key,
        name=key.upper(),
        kind=kind,
        seed=seed,
        eval=ev,
        machine=machine,
        backbone=backbone,
        curve=[[100, value / 2], [200, value]],
        params=2e6,
        head_params=5e5,
        macs=3e8,
        head_macs=1e8,
    )


def test_heads_variants_and_run_configs():
    assert [C.HEADS[k].kind for k in ("fcn", "gap", "segnext-mmseg")] == [
        "local",
        "global pooling",
        "random ham",
    ]
    assert all(osp.isfile(osp.join(REPO, h.config)) for h in C.HEADS.values())
    name, head = C.parse_variant(["nmf-r32", "ham-nmf-bptt", "model.decode_head.ham_cfg.R=32"])
    assert (name, head.kind) == ("nmf-r32", "ham")
    assert head.options == {
        "model.decode_head.ham_cfg.grad": "bptt",
        "model.decode_head.ham_cfg.R": 32,
    }
    with pytest.raises(UsageError, match="is not KEY=VALUE"):
        C.parse_variant(["x", "fcn", "oops"])
    for key in ("ham-nmf", "segnext", "fcn", "polynl"):
        cfg = C.run_config(
            key,
            C.HEADS[key],
            3,
            "/tmp/w",
            "data/x",
            "projects/context_lab/configs/lab_task.py",
            "ensemble",
            max_iters=300,
            curve_interval=50,
        )
        assert (cfg.train_cfg.max_iters, cfg.train_cfg.val_interval, cfg.randomness.seed) == (
            300,
            50,
            3,
        )
        assert cfg.train_dataloader.dataset.data_root == "data/x"
        assert "projects.context_lab.context_lab" in cfg.custom_imports.imports
        ham = cfg.model.decode_head.get("ham_cfg", {})
        assert (ham.get("eval_seed"), ham.get("eval_draws")) == (
            (0, 12) if C.HEADS[key].kind == "ham" else (None, None)
        )
        assert cfg.lab.backbone == ("MSCAN-T" if key == "segnext" else "ResNetV1c-18")


def test_report_tests_within_a_backbone_and_a_machine(tmp_path):
    runs = [run("fcn", "local", s, v) for s, v in enumerate((1, 2, 3))]
    runs += [run("gap", "global pooling", s, v) for s, v in enumerate((4, 5, 6))]
    runs += [run("nonlocal", "context", s, v) for s, v in enumerate((7, 8, 9))]
    runs += [run("ham-nmf", "ham", s, v, machine="CPU") for s, v in enumerate((5, 6, 7))]
    runs += [run("segnext", "ham", s, v, backbone="MSCAN-T") for s, v in enumerate((90, 95, 99))]
    rows = {r["key"]: r for r in C.summary_rows(runs, "paper", 8.5)}
    # three tests, each 3 seeds apart from 3 (p = 2 / C(6, 3) = 0.1), Holm: 3 x 0.1
    for key, name in (("fcn", "vs_best"), ("gap", "vs_best"), ("nonlocal", "vs_gap")):
        test, adjusted = rows[key][name]
        assert (test.p, adjusted) == (pytest.approx(0.1), pytest.approx(0.3))
    assert rows["nonlocal"]["is_best"] and rows["segnext"]["is_best"]  # best of each backbone
    assert rows["ham-nmf"]["vs_best"] == rows["ham-nmf"]["vs_gap"] == "other machine"
    assert rows["ham-nmf"]["values"] == [5, 6, 7] and rows["ham-nmf"]["others"] == [5.5, 6.5, 7.5]
    assert rows["segnext"]["iters"] == 100 and rows["nonlocal"]["iters"] == float("inf")
    (tmp_path / "runs.json").write_text(json.dumps(runs))
    C.main(
        [
            "--from-runs",
            str(tmp_path / "runs.json"),
            "--out-dir",
            str(tmp_path),
            "--threshold",
            "8.5",
        ]
    )
    md = (tmp_path / "results.md").read_text()
    assert "p = 0.1 (Holm 0.3); -6.0 [-8.0, -4.0]" in md and "other machine" in md
    assert "[90.0, 99.0] (75.0%)" in md and (tmp_path / "results.png").stat().st_size > 1000


def test_screen_verdict_needs_both_controls_below_and_a_context_head_above():
    runs = [
        dict(run(k, kind, s, v), task=t)
        for t, values in (("a", (60, 70, 85)), ("b", (60, 85, 90)))
        for k, kind, v in zip(
            ("fcn", "gap", "nonlocal"), ("local", "global pooling", "context"), values
        )
        for s in range(3)
    ]
    result = screen.verdict(runs + [dict(runs[0], task="c")], 80)
    assert [result[t]["separates"] for t in "abc"] == [True, False, None]
    assert result["a"]["medians"] == {"FCN": 60, "GAP": 70, "NONLOCAL": 85}
    assert "| a | 60.0 (3) | 70.0 (3) | 85.0 (3) | **yes** |" in screen.markdown(result, 80)


def test_bad_heads_are_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        run_cli(lambda: C.main(["--heads", "fcn", "nope", "--out-dir", str(tmp_path)]))
    assert exit.value.code == 2 and "nope" in capsys.readouterr().err


@pytest.mark.slow
def test_screen_dry_run_writes_the_verdict_of_every_candidate(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "projects.context_lab.context_lab.screen",
        "--dry-run",
        "--out-dir",
        str(tmp_path),
    ]
    proc = subprocess.run(
        cmd + ["--heads", "fcn", "nonlocal"], cwd=REPO, capture_output=True, text=True, timeout=3600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert sorted(verdict["tasks"]) == sorted(screen.CANDIDATES) and verdict["threshold"] == 80
    assert all(set(t["medians"]) == {"FCN", "NonLocal"} for t in verdict["tasks"].values())


@pytest.mark.slow
def test_a_tiny_comparison_in_two_processes_records_the_machine(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "projects.context_lab.context_lab.compare",
        "--heads",
        "gap",
        "ham-nmf",
        "--seeds",
        "0",
        "--task",
        "column",
        "--data-root",
        str(tmp_path / "data"),
        "--max-iters",
        "2",
        "--eval-runs",
        "2",
        "--jobs",
        "2",
        "--out-dir",
        str(tmp_path / "out"),
    ]
    C.tasks.generate(str(tmp_path / "data"), "column", False, size=64, num_train=8, num_val=4)
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads((tmp_path / "out" / "runs.json").read_text())
    assert [len(r["eval"].get("paper", [])) for r in runs] == [0, 2] and "ensemble" in runs[1][
        "eval"
    ]
    assert all("torch" in r["machine"] and r["macs"] > r["head_macs"] > 0 for r in runs)
