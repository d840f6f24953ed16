"""MultiEvalTTAModel: PyTorch-Encoding's multi-size evaluation (App. E.3, Context's --tta)."""

from __future__ import annotations

import pytest
import torch
from mmseg.models.data_preprocessor import SegDataPreProcessor
from torch import nn

from hamseg.engine.tta import MultiEvalTTAModel, view_size
from tests.helpers import one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]


class PixelModel(nn.Module):
    """A stand-in segmentor: logits = a 1x1 conv of each pixel, plus a ramp along the width
    (so that a flip changes them) and, with ``context``, the crop's mean (so that the windows do);
    records the size of every crop it sees."""

    def __init__(self, context: bool = False) -> None:
        super().__init__()
        self.data_preprocessor = SegDataPreProcessor(mean=MEAN, std=STD, bgr_to_rgb=True)
        self.conv = nn.Conv2d(3, 4, 1)
        with torch.no_grad():
            self.conv.weight.copy_(torch.linspace(-1, 1, 12).reshape(4, 3, 1, 1))
            self.conv.bias.copy_(torch.tensor([0.1, -0.2, 0.3, 0.0]))
        self.context, self.sizes = context, []

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        ramp = (
            torch.linspace(0, 1, x.shape[-1]).reshape(1, 1, 1, -1)
            * torch.arange(4.0)[:, None, None]
        )
        out = self.conv(x) + ramp
        return out + x.mean(dim=(1, 2, 3)).reshape(-1, 1, 1, 1) if self.context else out

    def encode_decode(self, x: torch.Tensor, metas: list) -> torch.Tensor:
        assert tuple(metas[0]["img_shape"]) == tuple(x.shape[-2:])
        self.sizes.append(tuple(x.shape[-2:]))
        return self.logits(x)

    def test_step(self, data):  # required by mmengine's BaseTTAModel
        raise NotImplementedError


def multi_eval(**kwargs) -> MultiEvalTTAModel:
    return MultiEvalTTAModel(module=PixelModel(kwargs.pop("context", False)), **kwargs)


def normalised(height: int, width: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(1, 3, height, width, generator=torch.Generator().manual_seed(seed))


def test_view_size_sets_the_long_side_and_rounds_the_other_half_up():
    assert view_size(30, 20, 40) == (40, 27)  # 20 * 40 / 30 = 26.67
    assert view_size(20, 30, 40) == (27, 40)
    assert view_size(375, 500, 520) == (390, 520)  # a Context image at scale 1: 520, not 500
    assert view_size(21, 21, 10) == (10, 10)


def test_views_crops_and_their_sizes():
    """30 x 20, base 40, crop 32: scale 0.5 -> 20 x 13, padded to one 32 x 32 crop; scale 1 ->
    40 x 27, padded to 40 x 32, 2 x 1 crops of stride 21 (the second one padded past the edge);
    each crop with and without flip."""
    tta = multi_eval(base_size=40, crop_size=32, scales=(0.5, 1.0))
    scores = tta.predict_scores(normalised(30, 20))
    assert scores.shape == (1, 4, 30, 20) and scores.dtype == torch.float64
    assert tta.stride == 21 and tta.module.sizes == [(32, 32)] * 6
    assert multi_eval(crop_size=480).stride == 320 and multi_eval(crop_size=513).stride == 342


def test_a_pixel_local_model_gives_exp_of_its_flip_summed_logits_whatever_the_windows():
    """The scale-1 view of a 45 x 38 image with base 45 is the image itself; 3 x 3 crops of 20
    (stride 13) overlap and are averaged: a model without context gives exp(l(x) + flip(l(flip x)))
    at every pixel, by hand."""
    tta = multi_eval(base_size=45, crop_size=20, scales=(1.0,))
    image = normalised(45, 38)
    got = tta.predict_scores(image)
    assert len(tta.module.sizes) == 3 * 3 * 2
    conv = tta.module.conv(image).double()
    ramp = torch.linspace(0, 1, 38).double() * torch.arange(4.0).double()[:, None]
    expected = (2 * conv + ramp[:, None, :] + ramp.flip(-1)[:, None, :]).exp()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=0)


def test_padding_is_black_and_cropped_off():
    """A view smaller than the crop is padded with black (pixel 0 normalised), cut off after."""
    tta = multi_eval(base_size=16, crop_size=24, scales=(1.0,), flip=False, context=True)
    image = normalised(16, 12)
    got = tta.predict_scores(image)
    black = (-torch.tensor(MEAN) / torch.tensor(STD)).reshape(1, 3, 1, 1)
    padded = black.expand(1, 3, 24, 24).clone()
    padded[..., :16, :12] = image
    expected = tta.module.logits(padded)[..., :16, :12].double().exp()
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=0)


def test_it_differs_from_mmseg_slide_windows():
    """mmseg's slide shifts its last window back inside the image; MultiEvalModule pads it past
    the edge: with context in the logits the two give other numbers."""
    tta = multi_eval(base_size=40, crop_size=24, scales=(1.0,), flip=False, context=True)
    image = normalised(40, 30)
    ours = tta.predict_scores(image).log()
    mmseg = torch.zeros(1, 4, 40, 30)
    count = torch.zeros(1, 1, 40, 30)
    for top in (0, 16):  # mmseg: 2 x 2 windows of 24, stride 16, the last ones ending at the edge
        for left in (0, 6):
            crop = image[..., top : top + 24, left : left + 24]
            mmseg[..., top : top + 24, left : left + 24] += tta.module.logits(crop)
            count[..., top : top + 24, left : left + 24] += 1
    assert (ours - (mmseg / count).double()).abs().max() > 0.05
