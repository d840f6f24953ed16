"""The paper's multi-scale + flip test as the authors' release runs it (seg/HamNet/test.py), to
the pixel, as an mmseg TTA model (docs/evaluation.md, "Multi-scale tests")."""

from __future__ import annotations

import math
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

__all__ = ["HamSegTTAModel", "pad_to_stride_plus_one", "use_tta"]


def use_tta(cfg: Config) -> None:
    """What ``tools/test.py --tta`` does to a config: the test split read with ``tta_pipeline``,
    the model wrapped in ``tta_model``. UsageError if the config lacks either."""
    if "tta_pipeline" not in cfg or "tta_model" not in cfg:
        raise UsageError("--tta needs tta_pipeline and tta_model in the config")
    cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline
    cfg.tta_model.module = cfg.model
    cfg.model = cfg.tta_model


def pad_to_stride_plus_one(inputs: Tensor, stride: int) -> Tensor:
    """(B, C, H, W) padded with 0 at the bottom and right to the next size k * stride + 1 (the
    release's ``pad_inf``: with output stride 8 and ``align_corners=True`` the feature grid then
    meets the first and the last pixel)."""
    h, w = inputs.shape[-2:]
    pad_h = math.ceil((h - 1) / stride) * stride + 1 - h
    pad_w = math.ceil((w - 1) / stride) * stride + 1 - w
    return F.pad(inputs, (0, pad_w, 0, pad_h)) if pad_h or pad_w else inputs


@MODELS.register_module()
class HamSegTTAModel(SegTTAModel):
    """The release's multi-scale + flip test of a segmentor (Table 4's VOC test).

    Each image comes from the test pipeline at its size H x W and is normalised by the
    segmentor's preprocessor. For every flip (first none, then the horizontal flip of the
    normalised image) and scale s: the view of ``int(s * H) x int(s * W)`` (floored), resized
    bilinearly with ``align_corners=True``, padded with 0 to ``k * pad_stride + 1``, predicted
    (``model.test_cfg.mode``: whole or slide), its logits cropped to the view, resized to H x W
    bilinearly with ``align_corners=True`` and flipped back. Use ``tta_pipeline =
    test_pipeline``.

    Args:
        module: The segmentor (config or module), set by ``tools/test.py --tta``.
        scales: The views' scales (release: 0.5 to 1.75, step 0.25).
        flip: Also every scale of the flipped image (release: True; 12 views in all).
        pad_stride: Pad each view to ``k * pad_stride + 1`` (release: 8); None: no padding.
        merge: 'logits_sum' (release) or 'prob_mean' (mmseg: the mean of the softmax).
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
        if (pad_stride is not None and pad_stride < 1) or not scales or min(scales) <= 0:
            raise ValueError(
                f"pad_stride >= 1 or None and scales > 0 needed: {pad_stride}, {scales}"
            )
        super().__init__(module=module, data_preprocessor=data_preprocessor)
        if getattr(self.module, "out_channels", 2) == 1:
            raise ValueError(f"{type(self).__name__} merges multi-class logits, not one channel")
        self.scales, self.flip = tuple(scales), flip
        self.pad_stride, self.merge = pad_stride, merge

    def test_step(self, data: dict) -> list[SegDataSample]:
        """Predict every image of a ``test_pipeline`` batch (``inputs``, ``data_samples``)."""
        if not isinstance(data["inputs"][0], Tensor):
            raise UsageError(
                f"{type(self).__name__} makes the views itself: set tta_pipeline = test_pipeline "
                "(the original image), not mmseg's TestTimeAug"
            )
        results = []
        for image, sample in zip(data["inputs"], data["data_samples"]):
            one = self.module.data_preprocessor(dict(inputs=[image], data_samples=[sample]), False)
            scores = self.predict_scores(one["inputs"]).squeeze(0)  # (C, H, W)
            out = SegDataSample(metainfo=sample.metainfo)
            out.seg_logits = PixelData(data=scores.float())
            out.pred_sem_seg = PixelData(data=scores.argmax(dim=0, keepdim=True))  # (1, H, W)
            if "gt_sem_seg" in sample:
                out.gt_sem_seg = sample.gt_sem_seg
            results.append(out)
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
                if self.pad_stride is not None:
                    view = pad_to_stride_plus_one(view, self.pad_stride)
                meta = dict(img_shape=view.shape[-2:], ori_shape=view.shape[-2:])
                logits = self.module.inference(view, [meta])[..., : size[0], : size[1]]
                logits = F.interpolate(logits, (height, width), mode="bilinear", align_corners=True)
                logits = logits.flip(-1) if flipped else logits  # (1, C, H, W)
                if self.merge == "prob_mean":
                    logits = logits.softmax(dim=1) / (len(self.scales) * (1 + self.flip))
                scores = scores + logits
        return scores
