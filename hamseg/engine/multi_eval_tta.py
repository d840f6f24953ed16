"""The multi-scale + flip test of PASCAL Context's attention models (paper App. E.3: "as other
state-of-the-art attention-based models", DANet, OCNet, OCR): PyTorch-Encoding's
``MultiEvalModule`` as an mmseg TTA model (docs/evaluation.md, "Multi-scale tests")."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional, Union

import torch
import torch.nn.functional as F
from mmseg.registry import MODELS
from torch import Tensor

from .tta import HamSegTTAModel

__all__ = ["MultiEvalTTAModel", "view_size"]


def view_size(height: int, width: int, long_side: int) -> tuple[int, int]:
    """The (height, width) whose longer side is ``long_side``, the other rounded half up."""
    if height > width:
        return long_side, int(width * long_side / height + 0.5)
    return int(height * long_side / width + 0.5), long_side


@MODELS.register_module()
class MultiEvalTTAModel(HamSegTTAModel):
    """PyTorch-Encoding's multi-size evaluation of a segmentor, one image at a time.

    Per scale s the normalised image is resized (bilinear, ``align_corners=True``) to the long
    side ``ceil(base_size * s)``. A view that fits the crop is padded with black (pixel 0) to
    ``crop_size`` and inferred whole; a larger one is padded to at least the crop and cut into
    crops on a grid of stride 2/3 crop from the top left, the last crops padded past the edge
    (mmseg's slide shifts them back inside). Each crop scores exp(logits + the flipped crop's
    logits flipped back); overlapping crops are averaged, the scales summed at the image size.
    Use it with ``tta_pipeline = test_pipeline``.

    Args:
        module: The segmentor (config or module), set by ``tools/test.py --tta``.
        base_size: The long side of the scale-1 view (PyTorch-Encoding: 520).
        crop_size: The side of the square crops (PyTorch-Encoding: 480; hamseg's Context
            configs: 513, their training crop).
        scales: PyTorch-Encoding's test script outside Cityscapes: 0.5 to 2.0.
        flip: Add the horizontally flipped crop's logits before the exponential.
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
        if base_size < 1 or crop_size < 2:
            raise ValueError(f"base_size >= 1 and crop_size >= 2 needed: {base_size}, {crop_size}")
        super().__init__(module, scales, flip, None, "logits_sum", data_preprocessor)
        self.base_size, self.crop_size = base_size, crop_size
        self.stride = int(crop_size * (2.0 / 3.0))  # MultiEvalModule's stride_rate

    @torch.no_grad()
    def predict_scores(self, image: Tensor) -> Tensor:
        """The summed scores (1, C, H, W), float64, of a normalised image (1, 3, H, W)."""
        height, width = image.shape[-2:]
        scores = 0.0
        for scale in self.scales:
            size = view_size(height, width, math.ceil(self.base_size * scale))
            view = self._pad(F.interpolate(image, size, mode="bilinear", align_corners=True))
            if max(size) <= self.crop_size:
                score = self._crop_scores(view)
            else:
                score = self._grid_scores(view)
            score = score[..., : size[0], : size[1]]  # (1, C, h, w)
            scores = scores + F.interpolate(
                score, (height, width), mode="bilinear", align_corners=True
            )
        return scores

    def _grid_scores(self, padded: Tensor) -> Tensor:
        """Crops on a grid of ``stride`` from the top left, their scores averaged."""
        ph, pw = padded.shape[-2:]
        rows = range(
            0, math.ceil((ph - self.crop_size) / self.stride) * self.stride + 1, self.stride
        )
        cols = range(
            0, math.ceil((pw - self.crop_size) / self.stride) * self.stride + 1, self.stride
        )
        total = count = None
        for top in rows:
            for left in cols:
                bottom, right = min(top + self.crop_size, ph), min(left + self.crop_size, pw)
                score = self._crop_scores(self._pad(padded[..., top:bottom, left:right]))
                if total is None:  # (1, C, ph, pw) and (1, 1, ph, pw), float64
                    total = score.new_zeros(1, score.shape[1], ph, pw)
                    count = score.new_zeros(1, 1, ph, pw)
                total[..., top:bottom, left:right] += score[..., : bottom - top, : right - left]
                count[..., top:bottom, left:right] += 1
        return total / count

    def _pad(self, image: Tensor) -> Tensor:
        """(1, 3, h, w) padded at the bottom and right to at least ``crop_size`` with black (the
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
        """exp(logits (+ the flipped crop's logits, flipped back)) (1, C, h, w), float64, from
        the segmentor's logits at the crop's size (mmseg's slide-window call)."""
        meta = [dict(img_shape=crop.shape[-2:])]
        logits = self.module.encode_decode(crop, meta)
        if self.flip:
            logits = logits + self.module.encode_decode(crop.flip(-1), meta).flip(-1)
        return logits.double().exp()
