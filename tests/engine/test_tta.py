"""HamSegTTAModel and HamReleaseRescale against the authors' release, to float tolerance.

The release's test and augmentation (Gsunshine/Enjoy-Hamburger, seg/HamNet/test.py: ``fetch``,
``pad_inf``, ``trans_scale``, ``test_main``; dataset.py: ``scale``) are rewritten below from
reading them, and run on the same tiny model, weights and images (JPEGs of odd sizes) as
hamseg's mmseg path: the image loaded by mmseg's pipeline, normalised by the preprocessor."""

from __future__ import annotations

import copy

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmcv.transforms import Compose, Resize
from mmengine.config import Config, ConfigDict
from mmengine.dataset import pseudo_collate
from mmengine.registry import init_default_scope
from mmseg.registry import MODELS, TRANSFORMS
from PIL import Image

from hamseg.engine.tta import HamSegTTAModel, use_tta
from hamseg.utils.errors import UsageError
from tests.data.tiny_twin import tiny_model
from tests.helpers import one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

# seg/HamNet/settings.py
MEAN, STD = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])
TEST_SCALES, SCALES, STRIDE = (0.5, 0.75, 1.0, 1.25, 1.5, 1.75), (0.5, 0.75, 1.0, 2.0), 8
SIZES = [(37, 53), (48, 41), (29, 30)]  # h % 8 == 0 pads by 1; 0.75 * 37 = 27.75 floors to 27


def release_fetch(path: str) -> torch.Tensor:
    """test.py ``fetch``: PIL RGB, / 255, (x - MEAN) / STD, (1, 3, H, W)."""
    image = torch.FloatTensor(np.asarray(Image.open(path).convert("RGB"))) / 255
    return ((image - MEAN) / STD).permute(2, 0, 1).unsqueeze(0)


def release_pad_inf(image: torch.Tensor) -> torch.Tensor:
    h, w = image.shape[-2:]
    pad_h, pad_w = (STRIDE + 1 - h % STRIDE) % STRIDE, (STRIDE + 1 - w % STRIDE) % STRIDE
    return F.pad(image, (0, pad_w, 0, pad_h), value=0.0) if pad_h or pad_w else image


def release_views(net, image: torch.Tensor) -> list[torch.Tensor]:
    """test.py ``test_main``: the logits (1, C, h, w) of the 6 scales, then of the 6 flips."""
    _, _, h, w = image.shape
    views = []
    for flip in (False, True):
        for scale in TEST_SCALES:
            scale_h, scale_w = int(scale * h), int(scale * w)
            x = torch.flip(image, [3]) if flip else image
            x = F.interpolate(x, size=(scale_h, scale_w), mode="bilinear", align_corners=True)
            logit = net(release_pad_inf(x))[:, :, 0:scale_h, 0:scale_w]
            logit = F.interpolate(logit, size=[h, w], mode="bilinear", align_corners=True)
            views.append(torch.flip(logit, [3]) if flip else logit)
    return views


@pytest.fixture(scope="module")
def model():
    """The tiny HamHead (NMF, a new random dictionary at every forward, as the recipes) with
    the release's align_corners=True, initialised weights, eval mode."""
    init_default_scope("mmseg")
    torch.manual_seed(0)
    head = dict(align_corners=True, ham_cfg=dict(type="NMF", R=4, eval_seed=None, eval_draws=1))
    segmentor = MODELS.build(ConfigDict(tiny_model(5, head=head)))
    segmentor.init_weights()
    return segmentor.eval()


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> list[str]:
    root, rng, paths = tmp_path_factory.mktemp("jpegs"), np.random.default_rng(0), []
    for i, (h, w) in enumerate(SIZES):
        image = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (5, 5), 1.5)
        paths.append(str(root / f"{i}.jpg"))
        cv2.imwrite(paths[-1], image)
    return paths


def hamseg_batch(path: str) -> dict:
    """The test pipeline's batch of one image (the original image, as tta_pipeline)."""
    pipeline = Compose([dict(type="LoadImageFromFile"), dict(type="PackSegInputs")])
    return pseudo_collate([pipeline(dict(img_path=path))])


def release_net(segmentor):
    """The release's HamNet forward: logits up-sampled to the (padded) input, align_corners."""
    return lambda x: segmentor.encode_decode(x, [dict(img_shape=x.shape[-2:])])


def test_the_release_test_to_float_tolerance(model, images):
    """12 views per image of 3 odd sizes: the summed logits equal the release's to float
    rounding, the same 12 padded view sizes reach the backbone, and the dictionaries drawn at
    every forward are the same (one seed before each procedure)."""
    tta = HamSegTTAModel(module=model)
    sizes: list[tuple] = []
    hook = model.backbone.register_forward_pre_hook(lambda m, a: sizes.append(a[0].shape[-2:]))
    try:
        for path in images:
            torch.manual_seed(1)
            with torch.no_grad():
                expected = torch.stack(release_views(release_net(model), release_fetch(path)))
            torch.manual_seed(1)
            (got,) = tta.test_step(hamseg_batch(path))
            summed = expected.sum(dim=0)[0]  # (C, H, W)
            scale = summed.abs().max()
            torch.testing.assert_close(
                got.seg_logits.data, summed, rtol=0, atol=2e-6 * scale
            )  # measured: 4.6e-7
            agree = (got.pred_sem_seg.data[0] == summed.argmax(dim=0)).float().mean()
            assert agree > 0.999, agree
    finally:
        hook.remove()
    assert len(sizes) == 2 * 12 * len(images)  # release, then hamseg, per image
    for first in range(0, len(sizes), 24):
        assert sizes[first : first + 12] == sizes[first + 12 : first + 24]
    assert all((h - 1) % 8 == 0 and (w - 1) % 8 == 0 for h, w in sizes)
    assert sizes[:3] == [(25, 33), (33, 41), (41, 57)]  # 37 x 53: 18 x 26, 27 x 39, 37 x 53


def test_each_step_of_the_release_matters(model, images):
    """Controls: without the 8k+1 padding, or averaging probabilities, the scores differ."""
    torch.manual_seed(1)
    release = HamSegTTAModel(module=model).test_step(hamseg_batch(images[0]))[0].seg_logits.data
    for options in (dict(pad_stride=None), dict(merge="prob_mean")):
        torch.manual_seed(1)
        other = HamSegTTAModel(module=model, **options).test_step(hamseg_batch(images[0]))[0]
        assert (other.seg_logits.data - release).abs().max() > 1e-3, options


def test_prob_mean_is_the_mean_softmax_of_the_release_views(model, images):
    torch.manual_seed(2)
    with torch.no_grad():
        views = release_views(release_net(model), release_fetch(images[1]))
    expected = torch.stack([v.softmax(dim=1) for v in views]).mean(dim=0)[0]
    torch.manual_seed(2)
    got = HamSegTTAModel(module=model, merge="prob_mean").test_step(hamseg_batch(images[1]))[0]
    torch.testing.assert_close(got.seg_logits.data, expected, rtol=0, atol=1e-5)
    assert torch.equal(got.pred_sem_seg.data[0], got.seg_logits.data.argmax(dim=0))


def test_merge_is_checked_and_mmsegs_views_refused(model, images):
    with pytest.raises(ValueError, match="merge"):
        HamSegTTAModel(module=model, merge="vote")
    views = [hamseg_batch(images[0])["inputs"]]  # TestTimeAug's layout: a list per view
    with pytest.raises(UsageError, match="tta_pipeline = test_pipeline"):
        HamSegTTAModel(module=model).test_step(dict(inputs=views, data_samples=[[None]]))


def test_use_tta_wraps_the_model_and_reads_the_tta_pipeline():
    cfg = Config(dict(model=dict(type="M"), test_dataloader=dict(dataset=dict(pipeline=[]))))
    with pytest.raises(UsageError, match="tta_pipeline and tta_model"):
        use_tta(cfg)
    cfg.tta_pipeline, cfg.tta_model = [dict(type="LoadImageFromFile")], dict(type="T")
    use_tta(cfg)
    assert cfg.model == dict(type="T", module=dict(type="M"))
    assert cfg.test_dataloader.dataset.pipeline == [dict(type="LoadImageFromFile")]


def release_scale(image: torch.Tensor, label: torch.Tensor, ratio: float):
    """dataset.py ``scale`` with the drawn ratio."""
    image = F.interpolate(image, scale_factor=ratio, mode="bilinear", align_corners=True)
    return image, F.interpolate(label, scale_factor=ratio, mode="nearest")


@pytest.mark.parametrize("ratio", SCALES)
def test_the_training_rescale_is_the_releases(images, ratio):
    """HamReleaseRescale on the uint8 BGR image, then the preprocessor's normalisation, equals
    the release's scale of the normalised float image; the labels are equal. mmseg's Resize
    rounds the size (19 rows of 37 at 0.5, the release 18) and resamples with half-pixel
    centres: the measured difference is in docs/reports/protocol-2026-11-28-release-views.md."""
    bgr = cv2.imread(images[0])
    label = np.random.default_rng(0).integers(0, 21, bgr.shape[:2], dtype=np.uint8)
    results = dict(img=bgr, gt_seg_map=label, seg_fields=["gt_seg_map"])
    ours = TRANSFORMS.build(dict(type="HamReleaseRescale", ratios=[ratio]))(copy.deepcopy(results))
    rgb = torch.from_numpy(ours["img"][..., ::-1].copy()).permute(2, 0, 1)[None]
    mean, std = (
        torch.tensor(v).reshape(1, 3, 1, 1)
        for v in ([123.675, 116.28, 103.53], [58.395, 57.12, 57.375])
    )
    image, lab = release_scale(
        release_fetch(images[0]), torch.from_numpy(label).float()[None, None], ratio
    )
    torch.testing.assert_close((rgb - mean) / std, image, rtol=0, atol=1e-4)
    assert np.array_equal(ours["gt_seg_map"], lab[0, 0].numpy().astype(np.uint8))
    assert ours["img_shape"] == tuple(image.shape[-2:]) == (int(37 * ratio), int(53 * ratio))
    mmseg = Resize(scale_factor=ratio, keep_ratio=True)(copy.deepcopy(results))
    assert mmseg["img"].shape[:2] == (int(37 * ratio + 0.5), int(53 * ratio + 0.5))  # rounded
