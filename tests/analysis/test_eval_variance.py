"""tools/analysis/eval_variance.py: N evaluations of one checkpoint, their spread."""

from __future__ import annotations

import os.path as osp
import re

import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from mmseg.registry import MODELS

import hamseg.analysis.eval_variance as eval_variance
from hamseg.analysis import summarize
from hamseg.datasets.context_shapes import ContextShapesConfig, generate_context_shapes
from hamseg.utils.cli import build_config
from tests.conftest import REPO
from tests.helpers import make_checkpoint
from tests.tools.test_finetune_path import CUSTOM, layout_options, run, write_mask_layout


def test_summary_statistics():
    report = summarize([40.0, 42.0, 41.0])
    assert (report.mean, report.std, report.min, report.max) == (41.0, 1.0, 40.0, 42.0)
    assert summarize([7.5]).std == 0.0
    assert report.line() == (
        "mIoU over 3 evaluations: mean 41.0000, std 1.0000, min 40.0000, max 42.0000"
    )


def test_the_progress_bar_ends_its_line(monkeypatch, capsys):
    """What the tool prints after the runs starts on a new line (the bar redraws with \\r)."""
    results = iter([{"mIoU": 40.0}, {"mIoU": 42.0}, {"mIoU": 41.0}])

    class FakeRunner:
        model = None
        test = staticmethod(lambda: next(results))
        test_loop = type("Loop", (), {"run": staticmethod(lambda: next(results))})

    monkeypatch.setattr(eval_variance.Runner, "from_cfg", lambda cfg: FakeRunner)
    monkeypatch.setattr(eval_variance, "check_checkpoint_file", lambda model, path: None)
    report = eval_variance.evaluate_repeatedly(Config(), "ckpt.pth", runs=3)
    print("mIoU per run: ...")
    out = capsys.readouterr().out
    assert report.values == (40.0, 42.0, 41.0)
    assert "3/3" in out and "\nmIoU per run: ...\n" in out, repr(out)


@pytest.mark.slow
def test_seeded_evaluation_gives_std_zero_and_the_runs_are_printed(tmp_path):
    root = write_mask_layout(str(tmp_path / "data"))
    ckpt = make_checkpoint(str(tmp_path / "three.pth"), num_classes=3)
    opts = layout_options(root, workers=0) + ["model.decode_head.ham_cfg.eval_seed=0"]
    args = ["tools/analysis/eval_variance.py", CUSTOM, ckpt, "--runs", "3"]
    proc = run(*args, "--work-dir", str(tmp_path / "w"), "--cfg-options", *opts)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # on a line of its own: the progress bar's last redraw ends with a newline
    values = re.search(r"^mIoU per run: (.*)", proc.stdout, re.M).group(1).split(", ")
    assert len(values) == 3 and len(set(values)) == 1, values
    assert re.search(r"mIoU over 3 evaluations: mean [\d.]+, std 0\.0000", proc.stdout)


def test_a_checkpoint_of_another_class_count_is_one_line(tmp_path):
    root = write_mask_layout(str(tmp_path / "data"))
    ckpt = make_checkpoint(str(tmp_path / "seven.pth"))
    args = ["tools/analysis/eval_variance.py", CUSTOM, ckpt, "--work-dir", str(tmp_path / "w")]
    proc = run(*args, "--cfg-options", *layout_options(root, 0))
    assert proc.returncode == 2 and "the checkpoint has 7 classes, the config has 3" in proc.stderr


SEGNEXT_DEMO = osp.join(REPO, "configs", "demo", "hamlighthead-nmf_mscan-t_context-shapes.py")


class LogitsRecorder(Hook):
    """The logits of every test image, per test loop."""

    def __init__(self) -> None:
        self.runs: list[list[torch.Tensor]] = []

    def before_test_epoch(self, runner) -> None:
        self.runs.append([])

    def after_test_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        self.runs[-1] += [sample.seg_logits.data.clone() for sample in outputs]


def test_two_evaluations_of_one_segnext_checkpoint_give_the_identical_miou(tmp_path, monkeypatch):
    """The SegNeXt demo config (HamLightHead, eval_seed=0, MSCAN-T with random weights) through
    the real test loop twice on two Context Shapes images of 64 x 64: identical mIoU and
    logits. Control: the same runner with ``eval_seed=None`` gives different logits in two
    more test loops (the random dictionary reaches the output), so the comparison can fail."""
    data = str(tmp_path / "cs")
    generate_context_shapes(data, ContextShapesConfig(size=64, num_train=1, num_val=2), False)
    ckpt = str(tmp_path / "segnext.pth")
    init_default_scope("mmseg")
    torch.manual_seed(0)
    model = MODELS.build(Config.fromfile(SEGNEXT_DEMO).model)  # random weights, no init_weights
    torch.save(dict(meta=dict(), state_dict=model.state_dict()), ckpt)
    recorder, runners = LogitsRecorder(), []
    from_cfg = Runner.from_cfg

    def with_recorder(cfg):
        runners.append(from_cfg(cfg))
        runners[-1].register_hook(recorder)
        return runners[-1]

    monkeypatch.setattr(eval_variance.Runner, "from_cfg", with_recorder)
    options = {
        "data_root": data,
        "default_hooks.visualization.draw": False,
        "test_dataloader.num_workers": 0,
        "test_dataloader.persistent_workers": False,
    }
    cfg = build_config(SEGNEXT_DEMO, options, str(tmp_path / "work"))
    report = eval_variance.evaluate_repeatedly(cfg, ckpt, runs=2, progress=False)
    assert report.values[0] == report.values[1] and report.std == 0.0
    assert len(recorder.runs) == 2 and len(recorder.runs[0]) == 2
    first, second = (torch.cat([t.flatten() for t in run]) for run in recorder.runs)
    assert torch.equal(first, second)
    # the control, on the same runner: mmseg's behaviour, a new dictionary at every forward
    runners[0].model.decode_head.hamburger.ham.eval_seed = None
    runners[0].test_loop.run()
    runners[0].test_loop.run()
    first, second = (torch.cat([t.flatten() for t in run]) for run in recorder.runs[2:])
    assert not torch.equal(first, second)
