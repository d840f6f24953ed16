"""The multi-scale + flip test of PASCAL Context's comparators (paper Table 5): PyTorch-Encoding's
``MultiEvalModule`` (EncNet's code) as an mmseg TTA model.

What it computes differs from mmseg's ``TestTimeAug`` + ``slide`` (docs/recipes.md, "PASCAL
Context"): the long side of each view is ``base_size * scale`` (not the image's size times the
scale); a view whose long side fits the crop is padded to ``crop_size`` with black pixels and
inferred whole; a larger one is padded to at least the crop and cut into crops on a grid of
stride 2/3 crop from the top left, the last crops padded past the edge (mmseg shifts its last
window back inside the image); each crop's score is exp(logits + flipped logits); crop scores
are averaged where they overlap and the scales' scores summed at the image size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional, Union

import torch
import torch.nn.functional as F
from mmengine.structures import PixelData
from mmseg.models.segmentors.seg_tta import SegTTAModel
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample
from torch import Tensor

__all__ = ["MultiEvalTTAModel", "view_size"]


def view_size(height: int, width: int, long_side: int) -> tuple[int, int]:
    """The (height, width) whose longer side is ``long_side``, the other rounded half up."""
    if height > width:
        return long_side, int(width * long_side / height + 0.5)
    return int(height * long_side / width + 0.5), long_side


@MODELS.register_module()
class MultiEvalTTAModel(SegTTAModel):
    """PyTorch-Encoding's multi-size evaluation of a segmentor, one image at a time.

    Use it with ``tta_pipeline = test_pipeline`` (the original image): it resizes, flips, pads
    and crops the normalised image itself, with bilinear resizing, ``align_corners=True``.

    Args:
        module: The segmentor (config or module), set by ``tools/test.py --tta``.
        base_size: The long side of the scale-1 view (PyTorch-Encoding: 520).
        crop_size: The side of the square crops the model sees (PyTorch-Encoding: 480; hamseg's
            Context configs: 513, their training crop).
        scales: Long side ``ceil(base_size * scale)`` per view (PyTorch-Encoding's test script
            outside Cityscapes: 0.5 to 2.0).
        flip: Add the horizontally flipped view's logits before the exponential.
        data_preprocessor: Optional preprocessor for ``module``.
    """

    def __init__(
        self,
        module: Union[dict, torch.nn.Module],
        base_size: int = 520,
        crop_size: int = 480,
        scales: Sequence[float] = (0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0),
        flip: bool = True,
        data_preprocessor: Optional[dict] = None,
    ) -> None:
        if base_size < 1 or crop_size < 2 or not scales or min(scales) <= 0:
            raise ValueError(
                f"base_size >= 1, crop_size >= 2 and positive scales needed, got {base_size}, "
                f"{crop_size}, {scales}"
            )
        super().__init__(module=module, data_preprocessor=data_preprocessor)
        self.base_size = base_size
        self.crop_size = crop_size
        self.scales = tuple(scales)
        self.flip = flip
        self.stride = int(crop_size * (2.0 / 3.0))  # MultiEvalModule's stride_rate

    def test_step(self, data: dict) -> list[SegDataSample]:
        """Predict every image of a ``test_pipeline`` batch (``inputs``, ``data_samples``)."""
        results = []
        for image, sample in zip(data["inputs"], data["data_samples"]):
            one = self.module.data_preprocessor(dict(inputs=[image], data_samples=[sample]), False)
            scores = self.predict_scores(one["inputs"]).squeeze(0)  # (C, H, W)
            out = SegDataSample(metainfo=sample.metainfo)
            out.seg_logits = PixelData(data=scores.float())
            out.pred_sem_seg = PixelData(data=scores.argmax(dim=0, keepdim=True))
            if "gt_sem_seg" in sample:
                out.gt_sem_seg = sample.gt_sem_seg
            results.append(out)
        return results

    @torch.no_grad()
    def predict_scores(self, image: Tensor) -> Tensor:
        """The summed scores (1, C, H, W), float64, of a normalised image (1, 3, H, W)."""
        height, width = image.shape[-2:]
        scores = None
        for scale in self.scales:
            size = view_size(height, width, math.ceil(self.base_size * scale))
            view = F.interpolate(image, size, mode="bilinear", align_corners=True)
            if max(size) <= self.crop_size:
                score = self._crop_scores(self._pad(view))[..., : size[0], : size[1]]
            else:
                score = self._grid_scores(self._pad(view))[..., : size[0], : size[1]]
            score = F.interpolate(score, (height, width), mode="bilinear", align_corners=True)
            scores = score if scores is None else scores + score
        return scores

    def _grid_scores(self, padded: Tensor) -> Tensor:
        """Crops on a grid of ``stride`` from the top left, their scores averaged."""
        ph, pw = padded.shape[-2:]
        rows = math.ceil((ph - self.crop_size) / self.stride) + 1
        cols = math.ceil((pw - self.crop_size) / self.stride) + 1
        total = None
        count = padded.new_zeros(1, 1, ph, pw, dtype=torch.float64)
        for top in range(0, rows * self.stride, self.stride):
            for left in range(0, cols * self.stride, self.stride):
                bottom = min(top + self.crop_size, ph)
                right = min(left + self.crop_size, pw)
                crop = self._pad(padded[..., top:bottom, left:right])
                score = self._crop_scores(crop)[..., : bottom - top, : right - left]
                if total is None:
                    total = padded.new_zeros(1, score.shape[1], ph, pw, dtype=torch.float64)
                total[..., top:bottom, left:right] += score
                count[..., top:bottom, left:right] += 1
        return total / count

    def _pad(self, image: Tensor) -> Tensor:
        """Pad (1, 3, h, w) at the bottom and right to at least ``crop_size`` with black (the
        normalised value of pixel 0)."""
        height, width = image.shape[-2:]
        if height >= self.crop_size and width >= self.crop_size:
            return image
        preprocessor = self.module.data_preprocessor
        black = (-preprocessor.mean / preprocessor.std).reshape(1, -1, 1, 1).to(image)
        size = (max(height, self.crop_size), max(width, self.crop_size))
        padded = black.expand(*image.shape[:2], *size).clone()
        padded[..., :height, :width] = image
        return padded

    def _crop_scores(self, crop: Tensor) -> Tensor:
        """exp(logits (+ the flipped crop's logits, flipped back)), float64, at the crop's size."""
        logits = self._logits(crop)
        if self.flip:
            logits = logits + self._logits(crop.flip(-1)).flip(-1)
        return logits.double().exp()

    def _logits(self, crop: Tensor) -> Tensor:
        """The segmentor's logits (1, C, h, w) at the crop's size (mmseg's slide-window call)."""
        return self.module.encode_decode(crop, [dict(img_shape=crop.shape[-2:])])
