"""HamSegTTAModel: the release's MSFlip merge (summed logits) and 8k+1 padding in mmseg's TTA."""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import copy
import os.path as osp

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from mmengine.structures import PixelData
from mmseg.models.segmentors.seg_tta import SegTTAModel
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample

from hamseg.engine.tta import HamSegTTAModel, pad_to_stride_plus_one
from tests.conftest import REPO, TINY_FCN
from tests.helpers import one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny_cfg():
    return Config.fromfile(TINY_FCN)


def build_tta(cfg, **kwargs) -> HamSegTTAModel:
    init_default_scope("mmseg")
    torch.manual_seed(0)
    return MODELS.build(dict(type="HamSegTTAModel", module=copy.deepcopy(cfg.model), **kwargs))


def views_of(logits: list[list[float]]) -> list[SegDataSample]:
    """One pixel, one SegDataSample per view, with the given class logits."""
    out = []
    for values in logits:
        sample = SegDataSample(metainfo=dict(ori_shape=(1, 1), img_path="x.jpg"))
        sample.seg_logits = PixelData(data=torch.tensor(values).view(-1, 1, 1))
        sample.gt_sem_seg = PixelData(data=torch.zeros(1, 1, 1, dtype=torch.long))
        out.append(sample)
    return out


def test_merge_rules_differ_as_designed(tiny_cfg):
    # logit differences class0 - class1 of +2, +2, -6: their sum (-2) picks class 1, while the
    # mean probability of class 0, (0.8808 + 0.8808 + 0.0025) / 3 = 0.5880, picks class 0.
    views = views_of([[2.0, 0.0, -9.0], [2.0, 0.0, -9.0], [0.0, 6.0, -9.0]])
    summed = build_tta(tiny_cfg, merge="logits_sum").merge_preds([views])[0]
    assert summed.pred_sem_seg.data.item() == 1
    assert torch.allclose(summed.seg_logits.data.flatten(), torch.tensor([4.0, 6.0, -27.0]))
    mean = build_tta(tiny_cfg, merge="prob_mean").merge_preds([views])[0]
    assert mean.pred_sem_seg.data.item() == 0
    assert mean.seg_logits.data.flatten()[0].item() == pytest.approx(0.5880, abs=1e-4)
    assert summed.pred_sem_seg.data.shape == (1, 1, 1) and "gt_sem_seg" in summed


def test_prob_mean_matches_mmseg_segttamodel(tiny_cfg):
    gen = torch.Generator().manual_seed(0)
    views = []
    for _ in range(4):
        sample = SegDataSample(metainfo=dict(ori_shape=(5, 7), img_path="x.jpg"))
        sample.seg_logits = PixelData(data=3 * torch.randn(3, 5, 7, generator=gen))
        views.append(sample)
    ours = build_tta(tiny_cfg, merge="prob_mean").merge_preds([views])[0]
    theirs = SegTTAModel(module=build_tta(tiny_cfg).module).merge_preds([copy.deepcopy(views)])[0]
    assert torch.equal(ours.pred_sem_seg.data.squeeze(), theirs.pred_sem_seg.data.squeeze())


def test_options_are_checked(tiny_cfg):
    with pytest.raises(ValueError, match="merge"):
        build_tta(tiny_cfg, merge="vote")
    with pytest.raises(ValueError, match="pad_stride"):
        build_tta(tiny_cfg, pad_stride=0)


@pytest.mark.parametrize("size,padded", [(33, 33), (32, 33), (34, 41), (1, 1), (505, 505)])
def test_pad_to_stride_plus_one(size, padded):
    x = torch.ones(1, 3, size, 9)
    out, pad_h, pad_w = pad_to_stride_plus_one(x, 8)
    assert out.shape == (1, 3, padded, 9) and (pad_h, pad_w) == (padded - size, 0)
    assert out[..., size:, :].abs().sum() == 0  # zero = mean colour after normalisation


@pytest.mark.parametrize("flip", [False, True])
def test_padded_view_is_cropped_then_flipped_back(tiny_cfg, flip):
    tta = build_tta(tiny_cfg, pad_stride=8).eval()
    model = tta.module
    h, w = 30, 37
    image = torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=torch.Generator())
    meta = dict(ori_shape=(h, w), img_shape=(h, w), flip=flip, flip_direction="horizontal")
    view = dict(inputs=[image], data_samples=[SegDataSample(metainfo=meta)])
    seen = []
    model.backbone.register_forward_pre_hook(lambda m, args: seen.append(args[0].shape[-2:]))
    with torch.no_grad():
        got = tta._predict_padded(copy.deepcopy(view))[0].seg_logits.data
        # by hand: normalise, pad to 33 x 41, predict, crop, flip back
        inputs = model.data_preprocessor(copy.deepcopy(view), False)["inputs"]
        padded = F.pad(inputs, (0, 41 - w, 0, 33 - h))
        logits = model.encode_decode(padded, [dict(img_shape=(h, w), pad_shape=(33, 41))])
        expected = logits[0, :, :h, :w]
        expected = expected.flip(-1) if flip else expected
    assert [tuple(s) for s in seen] == [(33, 41), (33, 41)]
    torch.testing.assert_close(got, expected)


def test_tta_test_loop_end_to_end(tiny_cfg, tiny_data, tmp_path):
    """tools/test.py --tta's config surgery + Runner.test() with the padded, summed TTA."""
    cfg = copy.deepcopy(tiny_cfg)
    cfg.work_dir = str(tmp_path)
    cfg.test_dataloader.dataset.data_root = tiny_data
    cfg.tta_pipeline = [
        dict(type="LoadImageFromFile"),
        dict(
            type="TestTimeAug",
            transforms=[
                [dict(type="Resize", scale_factor=s, keep_ratio=True) for s in (0.5, 0.75, 1.0)],
                [
                    dict(type="RandomFlip", prob=0.0, direction="horizontal"),
                    dict(type="RandomFlip", prob=1.0, direction="horizontal"),
                ],
                [dict(type="LoadAnnotations")],
                [dict(type="PackSegInputs")],
            ],
        ),
    ]
    cfg.tta_model = dict(type="HamSegTTAModel", merge="logits_sum", pad_stride=8)
    # as tools/test.py --tta does
    cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline
    cfg.tta_model.module = cfg.model
    cfg.model = cfg.tta_model
    cfg.default_hooks.visualization = dict(type="SegVisualizationHook")
    runner = Runner.from_cfg(cfg)
    calls = []
    runner.model.module.backbone.register_forward_pre_hook(
        lambda m, args: calls.append(tuple(args[0].shape[-2:]))
    )
    metrics = runner.test()
    assert 0.0 <= metrics["mIoU"] <= 100.0
    assert len(calls) == 2 * 6  # 2 val images x 3 scales x 2 flips
    assert all((hh - 1) % 8 == 0 and (ww - 1) % 8 == 0 for hh, ww in calls)


def test_voc_config_tta_settings():
    cfg = Config.fromfile(osp.join(REPO, "configs", "ham_voc.py"))
    assert cfg.tta_model == dict(type="HamSegTTAModel", merge="logits_sum", pad_stride=8)
