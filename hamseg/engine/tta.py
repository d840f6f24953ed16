"""The paper's multi-scale + flip test as the authors' release runs it (seg/HamNet/test.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Union

import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.structures import PixelData
from mmseg.models.segmentors.seg_tta import SegTTAModel
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample
from torch import Tensor

from hamseg.utils.errors import UsageError


def use_tta(cfg: Config) -> None:
    """``tools/test.py --tta``: read the test split with ``tta_pipeline``, wrap in ``tta_model``."""
    if "tta_pipeline" not in cfg or "tta_model" not in cfg:
        raise UsageError("--tta needs tta_pipeline and tta_model in the config")
    cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline
    cfg.tta_model.module = cfg.model
    cfg.model = cfg.tta_model


@MODELS.register_module()
class HamSegTTAModel(SegTTAModel):
    """The release's multi-scale + flip test (Table 4's VOC test), to the pixel.

    For the normalised image (H x W) and each of its horizontal flip: each scale s gives the view
    ``int(s * H) x int(s * W)`` (bilinear, ``align_corners=True``), padded with 0 at the bottom
    and right to ``k * pad_stride + 1`` (the release's ``pad_inf``), predicted by
    ``module.inference``, cropped back, resized to H x W and flipped back. Use it with
    ``tta_pipeline = test_pipeline``: it makes the views itself.

    Args:
        module: The segmentor (config or module), set by ``tools/test.py --tta``.
        scales: The views' scales (release: 0.5 to 1.75).
        flip: Also the flipped image (release: 12 views in all).
        pad_stride: Pad each view to ``k * pad_stride + 1`` (release: 8); None: no padding.
        merge: 'logits_sum' (release) or 'prob_mean' (mmseg's mean of the softmax).
        data_preprocessor: Optional preprocessor for ``module``.
    """

    def __init__(
        self,
        module: Union[dict, torch.nn.Module],
        scales: Sequence[float] = (0.5, 0.75, 1.0, 1.25, 1.5, 1.75),
        flip: bool = True,
        pad_stride: Optional[int] = 8,
        merge: str = "logits_sum",
        data_preprocessor: Optional[dict] = None,
    ) -> None:
        if merge not in ("logits_sum", "prob_mean"):
            raise ValueError(f"merge must be 'logits_sum' or 'prob_mean', got {merge!r}")
        super().__init__(module=module, data_preprocessor=data_preprocessor)
        self.scales, self.flip = tuple(scales), flip
        self.pad_stride, self.merge = pad_stride, merge

    def test_step(self, data: dict) -> list[SegDataSample]:
        """Predict every image of a ``test_pipeline`` batch."""
        if not isinstance(data["inputs"][0], Tensor):
            raise UsageError(
                f"{type(self).__name__} makes the views itself: set tta_pipeline = test_pipeline"
            )
        results = []
        for image, sample in zip(data["inputs"], data["data_samples"]):
            one = self.module.data_preprocessor(dict(inputs=[image], data_samples=[sample]))
            scores = self.predict_scores(one["inputs"])[0]  # (C, H, W)
            sample.seg_logits = PixelData(data=scores.float())
            sample.pred_sem_seg = PixelData(data=scores.argmax(dim=0, keepdim=True))
            results.append(sample)
        return results

    @torch.no_grad()
    def predict_scores(self, image: Tensor) -> Tensor:
        """The merged scores (1, C, H, W) of a normalised image (1, 3, H, W)."""
        height, width = image.shape[-2:]
        scores = 0.0
        for flipped in (False, True)[: 1 + self.flip]:
            source = image.flip(-1) if flipped else image
            for scale in self.scales:
                size = (int(scale * height), int(scale * width))  # floored, as the release
                view = F.interpolate(source, size, mode="bilinear", align_corners=True)
                if self.pad_stride:
                    pad_h, pad_w = (-(side - 1) % self.pad_stride for side in size)
                    view = F.pad(view, (0, pad_w, 0, pad_h))
                meta = dict(img_shape=view.shape[-2:], ori_shape=view.shape[-2:])
                logits = self.module.inference(view, [meta])[..., : size[0], : size[1]]
                logits = F.interpolate(logits, (height, width), mode="bilinear", align_corners=True)
                logits = logits.flip(-1) if flipped else logits  # (1, C, H, W)
                if self.merge == "prob_mean":
                    logits = logits.softmax(dim=1) / (len(self.scales) * (1 + self.flip))
                scores = scores + logits
        return scores
