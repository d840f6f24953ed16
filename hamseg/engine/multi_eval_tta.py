"""PASCAL Context's multi-scale + flip test (paper App. E.3: "as other state-of-the-art
attention-based models"): PyTorch-Encoding's ``MultiEvalModule``, which DANet, OCNet, OCR use."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional, Union

import torch
import torch.nn.functional as F
from mmseg.registry import MODELS
from torch import Tensor

from .tta import HamSegTTAModel


def view_size(height: int, width: int, long_side: int) -> tuple[int, int]:
    """The (height, width) whose longer side is ``long_side``, the other rounded half up."""
    if height > width:
        return long_side, int(width * long_side / height + 0.5)
    return int(height * long_side / width + 0.5), long_side


@MODELS.register_module()
class MultiEvalTTAModel(HamSegTTAModel):
    """PyTorch-Encoding's multi-size evaluation of a segmentor, one image at a time.

    Per scale s the normalised image is resized (bilinear, ``align_corners=True``) to the long
    side ``ceil(base_size * s)`` and cut into ``crop_size`` crops on a grid of stride 2/3 crop
    from the top left; a crop past the edge is padded with black (pixel 0), where mmseg's slide
    shifts it back inside. Each crop scores exp(logits + the flipped crop's logits flipped back);
    overlapping crops are averaged, the scales summed at the image size. Use it with
    ``tta_pipeline = test_pipeline``.

    Args:
        module: The segmentor (config or module), set by ``tools/test.py --tta``.
        base_size: The long side of the scale-1 view (PyTorch-Encoding: 520).
        crop_size: The crops' side (PyTorch-Encoding: 480; the Context recipes: 513).
        scales: PyTorch-Encoding's test outside Cityscapes: 0.5 to 2.0.
        flip: Add the flipped crop's logits before the exponential.
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
        super().__init__(module, scales, flip, None, "logits_sum", data_preprocessor)
        self.base_size, self.crop_size = base_size, crop_size
        self.stride = int(crop_size * (2.0 / 3.0))  # MultiEvalModule's stride_rate

    @torch.no_grad()
    def predict_scores(self, image: Tensor) -> Tensor:
        """The summed scores (1, C, H, W), float64, of a normalised image (1, 3, H, W)."""
        height, width = image.shape[-2:]
        crop, stride = self.crop_size, self.stride
        pre = self.module.data_preprocessor
        black = (-pre.mean / pre.std).reshape(1, -1, 1, 1).expand(1, -1, crop, crop).to(image)
        meta = [dict(img_shape=(crop, crop))]
        scores = 0.0
        for scale in self.scales:
            h, w = view_size(height, width, math.ceil(self.base_size * scale))
            view = F.interpolate(image, (h, w), mode="bilinear", align_corners=True)
            total = count = 0.0
            for top in range(0, max(h - crop, 0) + stride, stride):
                for left in range(0, max(w - crop, 0) + stride, stride):
                    part = view[..., top : top + crop, left : left + crop]
                    ph, pw = part.shape[-2:]
                    padded = black.clone()  # (1, 3, crop, crop)
                    padded[..., :ph, :pw] = part
                    logits = self.module.encode_decode(padded, meta)
                    if self.flip:
                        logits = logits + self.module.encode_decode(padded.flip(-1), meta).flip(-1)
                    where = (left, w - left - pw, top, h - top - ph)
                    total = total + F.pad(logits[..., :ph, :pw].double().exp(), where)
                    count = count + F.pad(image.new_ones(1, 1, ph, pw, dtype=torch.float64), where)
            score = total / count  # (1, C, h, w)
            scores = scores + F.interpolate(
                score, (height, width), mode="bilinear", align_corners=True
            )
        return scores
