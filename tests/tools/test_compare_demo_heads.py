"""tools/compare_demo_heads.py: table, chart and resume, from stored run results (no training)."""

from __future__ import annotations

import json
import os
import os.path as osp

import cv2

from hamseg.datasets.context_shapes import ContextShapesConfig, generate_context_shapes
from tests.helpers import load_tool

compare = load_tool("compare_demo_heads.py")


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
    for name, config in compare.HEADS:
        if name in values:
            stem = osp.splitext(osp.basename(config))[0]
            for seed, v in enumerate(values[name]):
                _fake_run(osp.join(out, stem, f"seed{seed}"), name, seed, v)
    rc = compare.main(
        [
            "--heads",
            "FCN",
            "HamHead-NMF",
            "--data-root",
            data,
            "--out-dir",
            out,
            "--docs-prefix",
            str(tmp_path / "docs" / "res"),
        ]
    )
    assert rc == 0
    md = open(osp.join(out, "results.md")).read()
    assert "| FCN | **62.0** ± 1.6 | 60.0, 62.0, 64.0 | 1.00M / 0.300M | 61 s |" in md
    assert "| HamHead-NMF | **92.0** ± 2.2 | 90.0, 91.0, 95.0 |" in md
    assert "HamHead-NMF minus FCN: **+30.0** mIoU points." in md
    assert "Command: `python tools/compare_demo_heads.py --heads FCN HamHead-NMF" in md
    assert open(tmp_path / "docs" / "res.md").read() == md
    png = cv2.imread(str(tmp_path / "docs" / "res.png"))
    assert png is not None and png.shape[1] > png.shape[0] > 200
    with open(osp.join(out, "runs.json")) as f:
        assert len(json.load(f)["runs"]) == 6


def test_unknown_head_is_an_error(tmp_path):
    assert compare.main(["--heads", "Nope", "--out-dir", str(tmp_path)]) == 2
