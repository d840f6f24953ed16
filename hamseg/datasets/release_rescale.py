"""The release's random scale augmentation (seg/HamNet/dataset.py, ``scale``)."""

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from mmcv.transforms import BaseTransform
from mmseg.registry import TRANSFORMS


@TRANSFORMS.register_module()
class HamReleaseRescale(BaseTransform):
    """Rescale the image and its label maps by a ratio drawn from ``ratios``, as the release.

    The image in float32, bilinear with ``align_corners=True``, the labels nearest, both to
    ``floor(ratio * size)`` (``F.interpolate(scale_factor=ratio)``); mmseg's ``Resize`` rounds
    the size and resamples the uint8 image with half-pixel centres. Bilinear weights sum to 1,
    so resizing before the normalisation equals the release's resizing after it.

    Args:
        ratios: The ratios (release: 0.5 to 2.0, step 0.25).
    """

    def __init__(self, ratios: Sequence[float] = (0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0)) -> None:
        self.ratios = tuple(ratios)

    def transform(self, results: dict) -> dict:
        ratio = float(np.random.choice(self.ratios))
        image = torch.from_numpy(np.ascontiguousarray(results["img"], dtype=np.float32))
        image = image.permute(2, 0, 1)[None]  # (H, W, C) -> (1, C, H, W)
        image = F.interpolate(image, scale_factor=ratio, mode="bilinear", align_corners=True)
        results["img"] = image[0].permute(1, 2, 0).numpy()
        for key in results.get("seg_fields", []):
            label = torch.from_numpy(results[key].astype(np.float32))[None, None]  # (1, 1, H, W)
            label = F.interpolate(label, scale_factor=ratio, mode="nearest")
            results[key] = label[0, 0].numpy().astype(results[key].dtype)
        results["img_shape"] = results["img"].shape[:2]
        results["scale_factor"] = (ratio, ratio)
        return results
