"""The paper's multi-scale + flip tests: VOC's as the authors' release runs it (seg/HamNet/test.py),
PASCAL Context's as PyTorch-Encoding's ``MultiEvalModule`` (paper App. E.3)."""

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
