"""Multi-scale + flip test of the Hamburger release (seg/HamNet/test.py) as an mmseg TTA model:
the release pads every view to 8k + 1 (the stride-8 grid and ``align_corners=True`` meet the
image corners) and sums logits; mmseg averages probabilities. docs/recipes.md.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Union

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

MERGES = ("logits_sum", "prob_mean")


def use_tta(cfg: Config) -> None:
    """What ``tools/test.py --tta`` does to a config: the test split read with ``tta_pipeline``,
    the model wrapped in ``tta_model``. UsageError if the config lacks either."""
    if "tta_pipeline" not in cfg or "tta_model" not in cfg:
        raise UsageError("--tta needs tta_pipeline and tta_model in the config")
    cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline
    cfg.tta_model.module = cfg.model
    cfg.model = cfg.tta_model


def pad_to_stride_plus_one(
    inputs: Tensor, stride: int, value: float = 0.0
) -> tuple[Tensor, int, int]:
    """Pad (B, C, H, W) at the bottom and right to the next size k * stride + 1 (>= H, W) with
    ``value`` (0: the mean colour after normalisation); the batch and the added rows, columns."""
    h, w = inputs.shape[-2:]
    pad_h = math.ceil((h - 1) / stride) * stride + 1 - h
    pad_w = math.ceil((w - 1) / stride) * stride + 1 - w
    if pad_h or pad_w:
        inputs = F.pad(inputs, (0, pad_w, 0, pad_h), value=value)
    return inputs, pad_h, pad_w


@MODELS.register_module()
class HamSegTTAModel(SegTTAModel):
    """``SegTTAModel`` with the release's merge rule and 8k + 1 padding as options.

    Args:
        module: The segmentor (config or module), set by ``tools/test.py --tta``.
        merge: 'logits_sum' (release) or 'prob_mean' (mmseg: mean of the probabilities).
        pad_stride: Pad every view to ``k * pad_stride + 1`` (release: 8); None: mmseg's way.
        data_preprocessor: Optional preprocessor for ``module``.
    """

    def __init__(
        self,
        module: Union[dict, torch.nn.Module],
        merge: str = "logits_sum",
        pad_stride: Optional[int] = None,
        data_preprocessor: Optional[dict] = None,
    ) -> None:
        if merge not in MERGES:
            raise ValueError(f"merge must be one of {MERGES}, got {merge!r}")
        if pad_stride is not None and pad_stride < 1:
            raise ValueError(f"pad_stride must be >= 1 or None, got {pad_stride}")
        super().__init__(module=module, data_preprocessor=data_preprocessor)
        self.merge = merge
        self.pad_stride = pad_stride

    def test_step(self, data: Union[dict, tuple, list]) -> list[SegDataSample]:
        """Predict every view (padded if ``pad_stride`` is set) and merge the predictions."""
        if self.pad_stride is None:
            return super().test_step(data)
        if isinstance(data, dict):
            views: list[Any] = [dict(zip(data, v)) for v in zip(*data.values())]
        else:
            views = [list(v) for v in zip(*data)]
        return self.merge_preds(list(zip(*map(self._predict_padded, views))))

    def _predict_padded(self, view: Union[dict, list]) -> list[SegDataSample]:
        """One view: preprocess, pad to k * pad_stride + 1, predict (cropped back by mmseg)."""
        batch = self.module.data_preprocessor(view, False)
        pad_val = getattr(self.module.data_preprocessor, "pad_val", 0)
        inputs, pad_h, pad_w = pad_to_stride_plus_one(batch["inputs"], self.pad_stride, pad_val)
        samples = batch["data_samples"]
        for sample in samples:
            left, right, top, bottom = sample.metainfo.get(
                "img_padding_size", sample.metainfo.get("padding_size", (0, 0, 0, 0))
            )
            # mmseg crops img_padding_size after resizing the logits to pad_shape
            padding = [left, right + pad_w, top, bottom + pad_h]
            sample.set_metainfo(dict(img_padding_size=padding, pad_shape=tuple(inputs.shape[-2:])))
        return self.module(inputs, samples, mode="predict")

    def merge_preds(self, data_samples_list: list[list[SegDataSample]]) -> list[SegDataSample]:
        """Merge the views of each image (``seg_logits`` (C, H, W) at the image size, flipped
        back) into ``pred_sem_seg`` (1, H, W) and ``seg_logits`` (summed logits or mean
        probabilities), keeping ``gt_sem_seg``."""
        merged = []
        for views in data_samples_list:
            logits = torch.stack([v.seg_logits.data for v in views])  # (V, C, H, W)
            single = logits.shape[1] == 1
            if self.merge == "logits_sum":
                scores = logits.sum(dim=0)  # (C, H, W)
            else:
                probs = logits.sigmoid() if single else logits.softmax(dim=1)
                scores = probs.mean(dim=0)  # (C, H, W)
            if single:
                prob = scores.div(len(views)).sigmoid() if self.merge == "logits_sum" else scores
                pred = (prob > self.module.decode_head.threshold).to(torch.long)
            else:
                pred = scores.argmax(dim=0, keepdim=True)  # (1, H, W)
            out = SegDataSample(metainfo=views[0].metainfo)
            out.pred_sem_seg = PixelData(data=pred)
            out.seg_logits = PixelData(data=scores)
            if "gt_sem_seg" in views[0]:
                out.gt_sem_seg = views[0].gt_sem_seg
            merged.append(out)
        return merged
