"""tools.lab.analysis.head_comparison / head_report and tools/compare_demo_heads.py: the heads and
their options, one protocol for every head, the table from stored runs (numbers), resume, bad
input, the timing pass; a whole tiny comparison (slow)."""

from __future__ import annotations

import importlib.util
import json
import os
import os.path as osp
import subprocess
import sys

import cv2
import pytest
from tools.lab.analysis.context_rooms import ContextRoomsConfig, generate_context_rooms

from hamseg.cli import run_cli
from hamseg.utils.errors import UsageError
from tests.conftest import REPO
from tools.lab.analysis import head_comparison as hc
from tools.lab.analysis import head_report as report


def _run(key, seed, value, kind="context", curve=(), other=None):
    ev = dict(deterministic=value)
    if kind == "ham":
        ev = dict(paper=[value - 1.0, value + 1.0], ensemble=other)
    result = dict(max_iters=500, params=1_000_000, head_params=350_000)
    return dict(
        key=key, name=key.upper(), kind=kind, seed=seed, result=result, curve=list(curve), eval=ev
    )


def test_heads_controls_and_variants():
    assert list(hc.HEADS)[:2] == ["fcn", "gap"]
    assert (hc.HEADS["fcn"].kind, hc.HEADS["gap"].kind) == ("local", "global pooling")
    assert hc.HEADS["ham-nmf-bptt"].options == {"model.decode_head.ham_cfg.grad": "bptt"}
    assert hc.HEADS["segnext-mmseg"].kind == "random ham"
    assert all(osp.isfile(osp.join(REPO, h.config)) for h in hc.HEADS.values())
    name, head = hc.parse_variant(["nmf-r32", "ham-nmf-bptt", "model.decode_head.ham_cfg.R=32"])
    assert name == head.label == "nmf-r32" and head.kind == "ham"
    assert head.options == {
        "model.decode_head.ham_cfg.grad": "bptt",
        "model.decode_head.ham_cfg.R": 32,
    }
    with pytest.raises(UsageError, match="is not KEY=VALUE"):
        hc.parse_variant(["x", "fcn", "oops"])
    with pytest.raises(UsageError, match="BASE one of fcn, gap"):
        hc.parse_variant(["x", "nope"])


def test_run_config_sets_one_protocol_for_every_ham_and_the_curve():
    """The protocol reaches every hamseg ham (HamHead, HamLightHead); other heads have none;
    options, the schedule and the validation interval land in the run's config."""
    rooms = hc.TASKS["rooms"]
    for key, head in hc.HEADS.items():
        for protocol, settings in hc.PROTOCOLS.items():
            cfg = hc.run_config(head, rooms, protocol, max_iters=300, curve_interval=50)
            assert cfg.train_dataloader.dataset.type == "ContextRoomsDataset", key
            assert (cfg.train_cfg.max_iters, cfg.train_cfg.val_interval) == (300, 50)
            assert cfg.demo_name == head.label
            ham = cfg.model.decode_head.get("ham_cfg")
            if head.kind == "ham":
                assert {k: ham[k] for k in settings} == settings, key
            else:
                assert ham is None or "eval_seed" not in ham, key
    cfg = hc.run_config(hc.HEADS["ham-nmf-208"], hc.TASKS["shapes"], "paper", curve_interval=0)
    assert cfg.model.decode_head.ham_channels == 208
    assert cfg.train_cfg.val_interval == cfg.train_cfg.max_iters == 500
    assert cfg.train_dataloader.dataset.type == "ContextShapesDataset"


def test_lab_heads_runs_import_their_code_in_a_fresh_process(tmp_path):
    """The lab's heads (tools/lab/models/) are outside hamseg: every run's config file (what
    tools/run_demo.py loads in its own process, from the repository root) keeps the head
    config's import of them (``custom_imports``), beside the task's dataset on Context Rooms,
    so a process that imports only hamseg builds the head and finds the dataset."""
    paths = []
    for key in ("polynl", "attnconv"):
        for task in ("shapes", "rooms"):
            path = tmp_path / f"{key}_{task}.py"
            path.write_text(hc.run_config(hc.HEADS[key], hc.TASKS[task], "paper").pretty_text)
            paths.append(str(path))
    code = (
        "import sys, hamseg\n"
        "from mmengine.config import Config\n"
        "from mmengine.registry import init_default_scope\n"
        "from mmseg.registry import DATASETS, MODELS\n"
        "init_default_scope('mmseg')\n"
        "for path in sys.argv[1:]:\n"
        "    cfg = Config.fromfile(path)\n"
        "    head = MODELS.build(cfg.model.decode_head)\n"
        "    print(type(head).__name__, DATASETS.get(cfg.train_dataloader.dataset.type).__name__)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *paths], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == [
        "PolyNLHead",
        "ContextShapesDataset",
        "PolyNLHead",
        "ContextRoomsDataset",
        "AttnConvHead",
        "ContextShapesDataset",
        "AttnConvHead",
        "ContextRoomsDataset",
    ]


def test_final_value_is_the_protocols_number():
    ham = _run("ham", 0, 90.0, "ham", other=93.0)
    assert report.final_value(ham, "paper") == 90.0  # mean of 89 and 91
    assert report.final_value(ham, "ensemble") == 93.0
    mmseg = dict(eval=dict(paper=[80.0, 84.0]))  # LightHamHead: no ensemble exists
    assert report.final_value(mmseg, "ensemble") == 82.0
    assert report.final_value(_run("fcn", 0, 63.0), "paper") == 63.0


def test_table_numbers_test_and_timing_from_stored_runs():
    """Two heads x 3 seeds: median and range, seeds over the threshold, iterations to it,
    the exact rank test against the best head (2/C(6,3) = 0.1), the ensemble beside the
    paper's number, the heads' time ratio as the median of per-round ratios."""
    runs = [_run("fcn", s, v) for s, v in enumerate([62.0, 64.0, 60.0])]
    curves = [[(100, 50.0), (200, 91.0)], [(100, 92.0)], [(100, 30.0), (200, 40.0)]]
    runs += [
        _run("ham", s, v, "ham", curves[s], other=v + 2.0) for s, v in enumerate([95.0, 92.0, 70.0])
    ]
    timings = dict(fcn=[1.0, 2.0, 1.0], ham=[0.5, 1.2, 0.9])  # ratios 0.5, 0.6, 0.9
    rows = report.summary_rows(runs, ["fcn", "ham"], "paper", 90.0, timings)
    fcn, ham = rows
    assert ham["best"] and not fcn["best"] and ham["test"] is None
    assert fcn["test"].p == pytest.approx(0.1) and fcn["test"].u == 0.0
    assert ham["summary"].median == 92.0 and ham["summary"].reached == 2
    assert ham["summary"].iters_to_threshold == 200  # 200, 100, never
    assert ham["other"] == 94.0 and fcn["other"] is None
    assert ham["x_reference"] == pytest.approx(0.6) and ham["s_per_iter"] == 0.9
    lines = report.markdown_table(rows, "paper", 90.0)
    assert lines[0].startswith("| Head | val mIoU, median [min, max] |")
    assert "| ensemble (median) |" in lines[0] and "s / iter (x FCN)" in lines[0]
    assert lines[2] == (
        "| FCN | **62.0** [60.0, 64.0] | [60.0, 64.0] (75% only) | 0/3 | - | "
        "p = 0.1 (-30.0) | - | 0.35M | 1.00 (1.00x) |"
    )
    assert lines[3] == (
        "| HAM | **92.0** [70.0, 95.0] | [70.0, 95.0] (75% only) | 2/3 | 200 | best | 94.0 | "
        "0.35M | 0.90 (0.60x) |"
    )
    assert report.per_seed_lines(rows)[1] == "- HAM: 95.0, 92.0, 70.0 (seeds 0, 1, 2)"


def test_one_seed_prints_no_interval_and_no_test():
    rows = report.summary_rows(
        [_run("fcn", 4, 63.5), _run("x", 4, 90.0)], ["fcn", "x"], "paper", 90
    )
    lines = report.markdown_table(rows, "paper", 90.0)
    assert "| FCN | **63.5** (1 seed) | - | 0/1 | - | - |" in lines[2]
    assert "best" not in "\n".join(lines[2:])
    assert "±" not in "\n".join(lines) and "+-" not in "\n".join(lines)
    assert "One seed per head" in report.notes(rows, "paper", 5)


def test_learning_curve_reads_the_last_training_log(tmp_path):
    for stamp, points in (("20260101_000000", [(100, 10.0)]), ("20260102_000000", [(50, 20.0)])):
        vis = tmp_path / stamp / "vis_data"
        vis.mkdir(parents=True)
        lines = [json.dumps(dict(loss=1.0, step=1))]
        lines += [json.dumps(dict(aAcc=1.0, mIoU=v, step=s)) for s, v in points]
        (vis / "scalars.json").write_text("\n".join(lines) + "\n")
    assert hc.learning_curve(str(tmp_path)) == [(50, 20.0)]
    assert hc.learning_curve(str(tmp_path / "none")) == []


def test_time_heads_takes_turns():
    configs = {
        k: hc.run_config(hc.HEADS[k], hc.TASKS["shapes"], "paper") for k in ("fcn", "ham-nmf")
    }
    times = hc.time_heads(configs, rounds=3, warmup=1, batch=2, size=32)
    assert sorted(times) == ["fcn", "ham-nmf"]
    assert all(len(v) == 3 and min(v) > 0 for v in times.values())


def _tool():
    spec = importlib.util.spec_from_file_location(
        "cmp", osp.join(REPO, "tools", "compare_demo_heads.py")
    )
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


@pytest.mark.parametrize(
    "args, message",
    [
        (["--heads", "fcn", "FCN"], "error: --heads: unknown FCN; choose from fcn, gap, "),
        (["--variant", "v", "fcn", "x"], "error: --variant v: 'x' is not KEY=VALUE"),
        (
            ["--data-config", "configs/custom/nope.py"],
            "error: --data-config configs/custom/nope.py: no such config file",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        run_cli(lambda: _tool().main(["--out-dir", str(tmp_path / "o"), *args]))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "o").exists()


# A stand-in for tools/run_demo.py: fails on seed 13, else records that it ran.
FAKE_DEMO = """
import json, os, sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
if args["--seed"] == "13":
    sys.exit(3)
with open(os.path.join(args["--work-dir"], "ran.txt"), "a") as f:
    f.write(args["--seed"])
"""


def test_run_head_reuses_a_finished_run_and_names_a_failed_ones_log(tmp_path):
    cfg = hc.run_config(hc.HEADS["fcn"], hc.TASKS["shapes"], "paper")
    work = tmp_path / "fcn" / "seed4"
    work.mkdir(parents=True)
    stored = dict(config_text=cfg.pretty_text, eval_runs=5, eval=dict(deterministic=1.0))
    (work / "run.json").write_text(json.dumps(stored))
    demo = [sys.executable, "-c", FAKE_DEMO]
    assert hc.run_head("fcn", hc.HEADS["fcn"], 4, cfg, str(work), demo) == stored
    assert not (work / "ran.txt").exists()  # reused: not trained again
    with pytest.raises(RuntimeError, match=r"(?s)run failed \(3\): .*; see .*bad/run\.log$"):
        hc.run_head("fcn", hc.HEADS["fcn"], 13, cfg, str(tmp_path / "bad"), demo)


@pytest.mark.slow
def test_a_tiny_comparison_on_context_rooms(tmp_path):
    """fcn and ham-nmf x 2 seeds, 4 iterations on 64 px rooms: every run trained, evaluated
    under both protocols (the ham: 2 paper evaluations + the ensemble), the curve at 2 and 4,
    the table, both charts and the docs copies; a second call reuses every run."""
    data, out = str(tmp_path / "rooms"), str(tmp_path / "cmp")
    generate_context_rooms(data, ContextRoomsConfig(size=64, num_train=8, num_val=4), False)
    cmd = [sys.executable, "tools/compare_demo_heads.py", "--task", "rooms"]
    cmd += ["--heads", "fcn", "ham-nmf", "--seeds", "0", "1", "--max-iters", "4"]
    cmd += ["--curve-interval", "2", "--eval-runs", "2", "--time-rounds", "2"]
    cmd += ["--data-root", data, "--out-dir", out, "--docs-prefix", str(tmp_path / "d" / "r")]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    saved = json.load(open(osp.join(out, "runs.json")))
    assert [(r["key"], r["seed"]) for r in saved["runs"]] == [
        ("fcn", 0),
        ("fcn", 1),
        ("ham-nmf", 0),
        ("ham-nmf", 1),
    ]
    for run in saved["runs"]:
        assert [it for it, _ in run["curve"]] == [2, 4]
        assert run["curve"][-1][1] == pytest.approx(run["result"]["mIoU"])
        if run["key"] == "ham-nmf":
            assert len(run["eval"]["paper"]) == 2 and "ensemble" in run["eval"]
        else:
            assert run["eval"]["deterministic"] == pytest.approx(run["result"]["mIoU"])
    md = open(osp.join(out, "results.md")).read()
    assert md.startswith("# Heads on Context Rooms\n") and "| HamHead-NMF | **" in md
    assert open(tmp_path / "d" / "r.md").read() == md
    for name in ("r.png", "r_curves.png"):
        assert cv2.imread(str(tmp_path / "d" / name)) is not None
    again = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, env=env)
    assert again.returncode == 0 and "Iter(train)" not in again.stdout + again.stderr
