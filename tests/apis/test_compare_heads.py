"""hamseg.apis.demo.compare_heads and tools/compare_demo_heads.py: table, chart and resume from
stored run results (no training), and how one run is launched."""

from __future__ import annotations

import importlib.util
import json
import os
import os.path as osp
import subprocess
import sys

import cv2
import numpy as np
import pytest

from hamseg.apis.demo import HEADS, chart_labels, compare_heads, run_one
from hamseg.cli import run_cli
from hamseg.datasets.context_shapes import ContextShapesConfig, generate_context_shapes
from hamseg.utils.errors import UsageError
from tests.conftest import REPO

CUSTOM = "configs/custom/hamhead-nmf_r18-d8_custom.py"


def _fake_run(work: str, name: str, seed: int, miou: float) -> None:
    os.makedirs(work, exist_ok=True)
    res = dict(
        name=name,
        config="x.py",
        seed=seed,
        max_iters=500,
        mIoU=miou,
        aAcc=90.0,
        mAcc=80.0,
        params=1_000_000,
        head_params=300_000,
        train_time_s=60.0 + seed,
        val_time_s=2.0,
        total_time_s=70.0,
        checkpoint="c.pth",
        work_dir=work,
    )
    with open(osp.join(work, "demo_result.json"), "w") as f:
        json.dump(res, f)


def test_table_chart_and_resume(tmp_path):
    data = str(tmp_path / "cs")
    generate_context_shapes(data, ContextShapesConfig(size=32, num_train=1, num_val=1), False)
    out = str(tmp_path / "cmp")
    values = {"FCN": [60.0, 62.0, 64.0], "HamHead-NMF": [90.0, 91.0, 95.0]}
    for name, config in HEADS.values():
        if name in values:
            stem = osp.splitext(osp.basename(config))[0]
            for seed, v in enumerate(values[name]):
                _fake_run(osp.join(out, stem, f"seed{seed}"), name, seed, v)
    cmd = [sys.executable, "tools/compare_demo_heads.py", "--heads", "fcn", "ham-nmf"]
    cmd += ["--data-root", data, "--out-dir", out, "--docs-prefix", str(tmp_path / "docs" / "res")]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = open(osp.join(out, "results.md")).read()
    assert "| FCN | **62.0** ± 1.6 | 60.0, 62.0, 64.0 | 1.00M / 0.300M | 61 s |" in md
    assert "| HamHead-NMF | **92.0** ± 2.2 | 90.0, 91.0, 95.0 |" in md
    assert "HamHead-NMF minus FCN: **+30.0** mIoU points." in md
    assert "(ResNetV1c-18 OS8: ResNetV1c-18, base 16, output stride 8)." in md
    assert "MSCAN" not in md  # no SegNeXt head in this table
    assert "Command: `python tools/compare_demo_heads.py --heads fcn ham-nmf" in md
    assert open(tmp_path / "docs" / "res.md").read() == md
    png = cv2.imread(str(tmp_path / "docs" / "res.png"))
    assert png is not None and png.shape[1] > png.shape[0] > 200
    with open(osp.join(out, "runs.json")) as f:
        assert len(json.load(f)["runs"]) == 6
    assert "[6/6] HamHead-NMF seed 2 ... mIoU 95.0" in proc.stdout
    assert proc.stdout.strip().endswith("results.png")


def test_heads_are_short_names_with_their_table_labels():
    assert list(HEADS) == [
        "fcn", "ham-nmf", "ham-cd", "ham-vq", "nonlocal", "polynl", "attnconv", "segnext-mmseg",
        "segnext",
    ]  # fmt: skip
    assert HEADS["attnconv"] == ("AttnConv", "configs/demo/attnconv_r18-d8_context-shapes.py")
    assert HEADS["segnext"][0] == "SegNeXt-T HamLightHead"
    assert all(osp.isfile(osp.join(REPO, config)) for _, config in HEADS.values())


def test_unknown_head_is_an_error(tmp_path):
    with pytest.raises(UsageError) as err:
        compare_heads(["fcn", "Nope"], [0], [sys.executable], "cmd", out_dir=str(tmp_path))
    assert str(err.value) == "--heads: unknown Nope; choose from " + ", ".join(HEADS)
    assert not os.listdir(tmp_path)  # checked before anything is generated or run


@pytest.mark.parametrize(
    "args, message",
    [
        (["--heads", "fcn", "FCN"], "error: --heads: unknown FCN; choose from fcn, ham-nmf, "),
        (["--data-config", "configs/custom/nope.py"], "error: --data-config configs/custom/nope.py"
         ": no such config file"),
        (["--data-config", CUSTOM, "--data-root", "/nonexistent/my_data"], "data_root="
         "'/nonexistent/my_data'): not found: "),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    spec = importlib.util.spec_from_file_location(
        "cmp", osp.join(REPO, "tools", "compare_demo_heads.py")
    )
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    with pytest.raises(SystemExit) as exit_info:
        run_cli(lambda: tool.main(["--out-dir", str(tmp_path / "o"), *args]))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "o").exists()


def write_template_layout(root: str) -> str:
    """The custom template's layout: img_dir/{train,val}/NAME.jpg, ann_dir/.../NAME.png, 3
    classes, odd sizes (3 train, 2 val)."""
    rng = np.random.default_rng(0)
    colours = np.array([[90, 90, 90], [40, 40, 220], [220, 90, 40]], np.uint8)
    for split, n in (("train", 3), ("val", 2)):
        for sub in ("img_dir", "ann_dir"):
            os.makedirs(osp.join(root, sub, split))
        for i in range(n):
            h, w = 37 + 4 * i, 43 + 2 * i
            label = np.zeros((h, w), np.uint8)
            label[4:18, 5:20], label[h - 15 : h - 3, w - 16 : w - 2] = 1, 2
            img = (colours[label] + rng.integers(-20, 20, (h, w, 3))).clip(0, 255)
            cv2.imwrite(osp.join(root, "img_dir", split, f"{i}.jpg"), img.astype(np.uint8))
            cv2.imwrite(osp.join(root, "ann_dir", split, f"{i}.png"), label)
    return root


@pytest.mark.slow
def test_data_config_trains_the_chosen_heads_on_that_data(tmp_path):
    """--data-config: each head's model on the template's data (3 classes, its loaders), 2
    iterations, the same table and chart for that data."""
    data, out = write_template_layout(str(tmp_path / "mine")), str(tmp_path / "cmp")
    cmd = [sys.executable, "tools/compare_demo_heads.py", "--heads", "fcn", "attnconv"]
    cmd += ["--seeds", "3", "--max-iters", "2", "--data-config", CUSTOM, "--data-root", data]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd + ["--out-dir", out], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    md = open(osp.join(out, "results.md")).read()
    assert md.startswith(f"# Heads on {osp.basename(CUSTOM)}\n\nThe data of `{CUSTOM}`, seeds [3]")
    rows = [ln.split(" | ")[0] for ln in md.splitlines() if ln.startswith("| ") and "**" in ln]
    assert rows == ["| FCN", "| AttnConv"]
    assert "minus FCN" not in md and "Context Shapes" not in md
    runs = json.load(open(osp.join(out, "runs.json")))["runs"]
    assert [(r["name"], r["seed"], r["max_iters"]) for r in runs] == [
        ("FCN", 3, 2), ("AttnConv", 3, 2)
    ]  # fmt: skip
    log = open(osp.join(out, "attnconv_r18-d8_context-shapes", "seed3", "run.log")).read()
    assert "num_classes=3" in log.replace(" ", "") and data in log
    assert cv2.imread(osp.join(out, "results.png")) is not None


# A stand-in for tools/run_demo.py: writes its arguments as the result (or fails on seed 13).
FAKE_DEMO = """
import json, os, sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
print("training", args["--config"])
if args["--seed"] == "13":
    sys.exit(3)
os.makedirs(args["--work-dir"], exist_ok=True)
with open(os.path.join(args["--work-dir"], "demo_result.json"), "w") as f:
    json.dump(dict(args=sys.argv[1:], mIoU=50.0), f)
"""


def test_run_one_launches_resumes_and_reports_failures(tmp_path):
    demo = [sys.executable, "-c", FAKE_DEMO]
    work = str(tmp_path / "run")
    res = run_one("configs/demo/x.py", 4, work, demo, "data/cs", max_iters=7)
    assert res["args"] == [
        "--config", "configs/demo/x.py", "--seed", "4", "--work-dir", work,
        "--data-root", "data/cs", "--no-vis", "--max-iters", "7",
    ]  # fmt: skip
    assert open(osp.join(work, "run.log")).read() == "training configs/demo/x.py\n"
    assert run_one("other.py", 5, work, demo, "d") == res  # resumed: not run again
    assert run_one("other.py", 5, work, demo, "d", force=True)["args"][1] == "other.py"
    with pytest.raises(RuntimeError, match=r"(?s)run failed \(3\): .* --seed 13 .*; see .*run.log"):
        run_one("x.py", 13, str(tmp_path / "bad"), demo, "d")


def test_chart_names_each_heads_backbone():
    def rows(*names, seeds=(0,)):
        return [dict(name=n, seeds=list(seeds), max_iters=500) for n in names]

    segnext = ("SegNeXt-T LightHamHead (mmseg)", "SegNeXt-T HamLightHead")
    title, labels = chart_labels(rows(*segnext))
    assert title == "Context Shapes, MSCAN-T, 500 iters, 1 seed (dots)"
    assert labels == list(segnext)
    title, _ = chart_labels(rows("FCN", "HamHead-NMF", seeds=(0, 1, 2)))
    assert title == "Context Shapes, ResNetV1c-18 OS8, 500 iters, 3 seeds (dots)"
    title, labels = chart_labels(rows(*(label for label, _ in HEADS.values())))  # all heads
    assert "ResNet" not in title and "MSCAN" not in title
    assert labels[0] == "FCN\n(ResNetV1c-18 OS8)"
    assert labels[-1] == "SegNeXt-T HamLightHead\n(MSCAN-T)"
    assert "PolyNL\n(ResNetV1c-18 OS8)" in labels and "AttnConv\n(ResNetV1c-18 OS8)" in labels
    title, _ = chart_labels(rows("FCN"), "configs/custom/mine.py")
    assert title == "mine.py, ResNetV1c-18 OS8, 500 iters, 1 seed (dots)"
