"""PASCAL Context: the 60-class and the 59-class mIoU from one test run (ContextIoUMetric)."""

from __future__ import annotations

import os.path as osp
import re

import numpy as np
import pytest
import torch
from mmseg.datasets import PascalContextDataset
from mmseg.evaluation import IoUMetric

from hamseg.evaluation import ContextIoUMetric
from tests.data.tiny_twin import save_checkpoint, tiny_model, write_split, write_tiny_twin
from tests.robust.helpers import TEST, run_tool

# Six pixels (2 x 3) of a 3-class problem: background (0) and objects a (1), b (2); 255 = ignore.
LABEL = torch.tensor([[0, 1, 2], [1, 2, 255]])
SCORES = torch.tensor(  # (background, a, b) per pixel -> (C, H, W)
    [[[5.0, 1, 2], [3, 2, 0], [0, 1, 4]], [[0, 1, 3], [4, 0, 3], [0, 9, 0]]]
).permute(2, 0, 1)
# By hand. With background (argmax over 3 classes), the 5 labelled pixels:
#   label [0, 1, 2, 1, 2], prediction [0, 0, 2, 2, 0]
#   IoU: background 1 / 3 (1 hit; predicted 3, labelled 1), a 0 / 2, b 1 / 3 (predicted 2,
#   labelled 2, 1 hit) -> mIoU 2/9; aAcc 2/5; mAcc (1/1 + 0/2 + 1/2) / 3 = 1/2.
# Without background 0 (pixels labelled 0 ignored, argmax over a, b), the 4 object pixels:
#   label [a, b, a, b], prediction [a, b, b, b]
#   IoU: a 1 / 2, b 2 / 3 -> mIoU2 7/12; aAcc2 3/4; mAcc2 (1/2 + 2/2) / 2 = 3/4.
# With background_index=1 (pixels labelled a ignored, argmax over background, b), 3 pixels:
#   label [0, b, b], prediction [0, b, 0] -> IoU 1/2, 1/2; aAcc2 2/3; mAcc2 (1 + 1/2) / 2.
ALL = dict(aAcc=40.0, mIoU=22.22, mAcc=50.0)
EXPECTED = {
    0: dict(ALL, aAcc2=75.0, mIoU2=58.33, mAcc2=75.0),
    1: dict(ALL, aAcc2=66.67, mIoU2=50.0, mAcc2=75.0),
}
META = dict(classes=("background", "a", "b"), palette=[[0, 0, 0], [1, 1, 1], [2, 2, 2]])


def sample(scores: torch.Tensor, label: torch.Tensor) -> dict:
    """A test sample of scores (C, H, W) and a label (H, W)."""
    return dict(
        seg_logits=dict(data=scores),
        pred_sem_seg=dict(data=scores.argmax(dim=0, keepdim=True)),
        gt_sem_seg=dict(data=label[None]),
    )


def context_metric(meta: dict = META, background_index: int = 0) -> ContextIoUMetric:
    metric = ContextIoUMetric(background_index=background_index, iou_metrics=["mIoU"])
    metric.dataset_meta = meta
    return metric


@pytest.mark.parametrize("background_index", [0, 1])
def test_both_metrics_equal_the_hand_computation(background_index):
    metric = context_metric(background_index=background_index)
    metric.process(None, [sample(SCORES, LABEL)])
    got = metric.compute_metrics(metric.results)
    assert got == pytest.approx(EXPECTED[background_index], abs=0.005)


def test_sixty_classes_keep_iou_metric_and_add_the_59_class_numbers():
    rng = np.random.default_rng(0)
    samples = []
    for h, w in ((7, 9), (5, 11)):
        label = torch.from_numpy(rng.integers(0, 60, (h, w)))
        scores = torch.from_numpy(rng.normal(size=(60, h, w))).float()
        scores[label, torch.arange(h)[:, None], torch.arange(w)] += 2.5  # mostly right
        samples.append(sample(scores, label))
    ours, reference = context_metric(PascalContextDataset.METAINFO), IoUMetric()
    reference.dataset_meta = PascalContextDataset.METAINFO
    ours.process(None, samples)
    reference.process(None, samples)
    got = ours.compute_metrics(ours.results)
    expected = reference.compute_metrics(reference.results)
    assert {k: got[k] for k in expected} == expected
    assert set(got) == {*expected, "aAcc59", "mIoU59", "mAcc59"}
    assert got["mIoU59"] != got["mIoU"]


def test_a_model_without_background_class_is_refused():
    with pytest.raises(ValueError, match="predicts 2 classes, the dataset has 3"):
        context_metric().process(None, [sample(SCORES[1:], LABEL)])


def write_fake_context(root: str) -> str:
    """VOC2010 layout of the Context recipe: 3 images of odd sizes, labels in [0, 60) + 255."""
    rng = np.random.default_rng(0)
    images, labels = {}, {}
    for i, (h, w) in enumerate(((33, 45), (41, 29), (37, 37))):
        label = rng.choice([0, 0, 0, 5, 12, 59], (h, w)).astype(np.uint8)
        label[:2, :2] = 255
        labels[f"2008_00000{i}"] = label
        images[f"2008_00000{i}"] = (label[..., None] * 4 + rng.integers(0, 20, (h, w, 3))).astype(
            np.uint8
        )
    list_file = osp.join("ImageSets", "SegmentationContext", "val.txt")
    return write_split(root, images, list_file, labels, "SegmentationClassContext")


@pytest.fixture(scope="module")
def context_setup(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("context")
    root = write_fake_context(str(tmp / "VOC2010"))
    # eval_seed: deterministic NMF in evaluation; the recipe's test_cfg with windows that fit
    # the tiny images several times
    model = tiny_model(
        60,
        head=dict(ham_cfg=dict(type="NMF", R=4, eval_seed=0)),
        test_cfg=dict(mode="whole", crop_size=(40, 40), stride=(32, 32)),
    )
    config = write_tiny_twin("ham_context_60.py", str(tmp / "tiny_context.py"), model)
    return dict(
        tmp=tmp, root=root, config=config, checkpoint=save_checkpoint(config, str(tmp / "c.pth"))
    )


@pytest.mark.parametrize("tta", [pytest.param(False, marks=pytest.mark.slow), True])
def test_one_run_reports_both_metrics(context_setup, tta):
    """tools/test.py on the 60-class recipe: mmseg's slide inference, or App. E.3's --tta."""
    args = [TEST, context_setup["config"], context_setup["checkpoint"]]
    args += ["--tta"] if tta else []
    args += ["--work-dir", str(context_setup["tmp"] / f"work_{tta}"), "--cfg-options"]
    args += [
        f"test_dataloader.dataset.data_root={context_setup['root']}",
        "model.test_cfg.mode=slide",
    ]
    args += ["tta_model.base_size=40", "tta_model.crop_size=32"] if tta else []
    result = run_tool(args, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    log = result.stdout + result.stderr
    line = [x for x in log.splitlines() if "Iter(test)" in x and "mIoU59" in x]
    assert len(line) == 1, log[-3000:]
    values = dict(re.findall(r"(aAcc|mIoU|mAcc|aAcc59|mIoU59|mAcc59): ([\d.]+)", line[0]))
    assert set(values) == {"aAcc", "mIoU", "mAcc", "aAcc59", "mIoU59", "mAcc59"}
    assert all(0 <= float(v) <= 100 for v in values.values())
    if tta:  # App. E.3's test (headline and 60-class configs)
        assert "MultiEvalTTAModel" in log
