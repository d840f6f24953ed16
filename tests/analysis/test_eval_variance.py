"""tools/analysis/eval_variance.py: N evaluations of one checkpoint, their spread."""

from __future__ import annotations

import re

import pytest

from hamseg.analysis import summarize
from tests.helpers import make_checkpoint
from tests.tools.test_finetune_path import CUSTOM, layout_options, run, write_mask_layout


def test_summary_statistics():
    report = summarize([40.0, 42.0, 41.0])
    assert (report.mean, report.std, report.min, report.max) == (41.0, 1.0, 40.0, 42.0)
    assert summarize([7.5]).std == 0.0
    assert report.line() == (
        "mIoU over 3 evaluations: mean 41.0000, std 1.0000, min 40.0000, max 42.0000"
    )


@pytest.mark.slow
def test_seeded_evaluation_gives_std_zero_and_the_runs_are_printed(tmp_path):
    root = write_mask_layout(str(tmp_path / "data"))
    ckpt = make_checkpoint(str(tmp_path / "three.pth"), num_classes=3)
    opts = layout_options(root, workers=0) + ["model.decode_head.ham_cfg.eval_seed=0"]
    args = ["tools/analysis/eval_variance.py", CUSTOM, ckpt, "--runs", "3"]
    proc = run(*args, "--work-dir", str(tmp_path / "w"), "--cfg-options", *opts)
    assert proc.returncode == 0, proc.stderr[-3000:]
    values = re.search(r"mIoU per run: (.*)", proc.stdout).group(1).split(", ")
    assert len(values) == 3 and len(set(values)) == 1, values
    assert re.search(r"mIoU over 3 evaluations: mean [\d.]+, std 0\.0000", proc.stdout)


def test_a_checkpoint_of_another_class_count_is_one_line(tmp_path):
    root = write_mask_layout(str(tmp_path / "data"))
    ckpt = make_checkpoint(str(tmp_path / "seven.pth"))
    args = ["tools/analysis/eval_variance.py", CUSTOM, ckpt, "--work-dir", str(tmp_path / "w")]
    proc = run(*args, "--cfg-options", *layout_options(root, 0))
    assert proc.returncode == 2 and "the checkpoint has 7 classes, the config has 3" in proc.stderr
