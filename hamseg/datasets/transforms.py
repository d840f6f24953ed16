"""Loading transforms that check what they load and name the file when something is wrong.

Drop-in replacements for mmcv's ``LoadImageFromFile`` and mmseg's ``LoadAnnotations`` (same
arguments and outputs), registered in mmseg's ``TRANSFORMS``::

    dict(type='CheckedLoadImageFromFile'),
    dict(type='CheckedLoadAnnotations', num_classes=21),   # ignore_index=255 by default

They raise :class:`~hamseg.datasets.samples.InvalidSampleError` for a missing, unreadable or
corrupt file, a label map with several channels or of another size than its image, and label
values (after the dataset's ``reduce_zero_label`` / ``label_map``) outside ``[0, num_classes)``
that are not the ignore index, listing the offending values. mmseg's own loaders would instead
fail with an unrelated ``AttributeError`` on ``None``, or silently wrap 16-bit labels to uint8
and train on wrong classes.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from mmcv.transforms import LoadImageFromFile
from mmseg.datasets.transforms import LoadAnnotations
from mmseg.registry import TRANSFORMS

from .samples import InvalidSampleError, label_problems, read_image, read_label

__all__ = ["CheckedLoadAnnotations", "CheckedLoadImageFromFile"]


@TRANSFORMS.register_module()
class CheckedLoadImageFromFile(LoadImageFromFile):
    """``LoadImageFromFile`` that names the file when it is missing, unreadable or corrupt.

    Args:
        **kwargs: ``LoadImageFromFile`` arguments (``to_float32``, ``color_type``,
            ``imdecode_backend``, ``ignore_empty``, ``backend_args``). With ``ignore_empty``
            a bad file yields None (mmengine then draws another sample), as in mmcv.
    """

    def transform(self, results: dict) -> Optional[dict]:
        """Load ``results['img_path']`` into ``results['img']``."""
        if self.file_client_args is not None:  # deprecated mmcv path: keep mmcv's behaviour
            return super().transform(results)
        try:
            img = read_image(
                results["img_path"], self.color_type, self.imdecode_backend, self.backend_args
            )
        except InvalidSampleError:
            if self.ignore_empty:
                return None
            raise
        if self.to_float32:
            img = img.astype(np.float32)
        results["img"] = img
        results["img_shape"] = img.shape[:2]
        results["ori_shape"] = img.shape[:2]
        return results


@TRANSFORMS.register_module()
class CheckedLoadAnnotations(LoadAnnotations):
    """``LoadAnnotations`` that checks the label map against its image and the class count.

    Args:
        num_classes: Number of classes; valid labels are ``0 .. num_classes - 1``. None: the
            decode head's, which hamseg's tools fill in (train, test, validate_dataset:
            :func:`~hamseg.datasets.checked_loaders.use_checked_loaders`), so a config changes
            its class count in the head and the dataset's ``metainfo`` alone; left None (mmseg's
            own tools) every value 0..255 passes and the rest is checked.
        ignore_index: The label ignored by the loss (mmseg's default 255).
        reduce_zero_label: As in ``LoadAnnotations`` (default: the dataset's setting).
        backend_args: mmengine file backend arguments.
        imdecode_backend: Decoder of the label files (default 'pillow', as mmseg).
    """

    def __init__(
        self,
        num_classes: Optional[int] = None,
        ignore_index: int = 255,
        reduce_zero_label: Optional[bool] = None,
        backend_args: Optional[dict] = None,
        imdecode_backend: str = "pillow",
    ) -> None:
        super().__init__(
            reduce_zero_label=reduce_zero_label,
            backend_args=backend_args,
            imdecode_backend=imdecode_backend,
        )
        if num_classes is not None and num_classes < 1:
            raise ValueError(f"num_classes must be >= 1, got {num_classes}")
        self.num_classes = num_classes
        self.ignore_index = ignore_index

    def _load_seg_map(self, results: dict) -> None:
        """Load, check and map ``results['seg_map_path']`` into ``results['gt_seg_map']``.

        A sample without a ``seg_map_path`` key (prediction only: mmseg's ``inference_model`` and
        ``MMSegInferencer`` keep this transform, they remove only ``LoadAnnotations``) passes
        unchanged; a listed label file that is missing or bad is still an error.
        """
        if "seg_map_path" not in results:
            return
        path = results["seg_map_path"]
        raw = read_label(path, self.imdecode_backend, self.backend_args)
        reduce_zero_label = results.get("reduce_zero_label", False)
        if self.reduce_zero_label is not None and self.reduce_zero_label != reduce_zero_label:
            raise ValueError(
                f"the dataset sets reduce_zero_label={reduce_zero_label} but "
                f"CheckedLoadAnnotations has reduce_zero_label={self.reduce_zero_label}"
            )
        label, problems = label_problems(
            raw,
            256 if self.num_classes is None else self.num_classes,
            self.ignore_index,
            reduce_zero_label,
            results.get("label_map"),
            results.get("ori_shape"),
        )
        if problems:
            image = results.get("img_path")
            raise InvalidSampleError(
                f"label file {path!r}: {'; '.join(problems)}"
                + (f" (image {image!r})" if image else "")
            )
        results["gt_seg_map"] = label
        results["seg_fields"].append("gt_seg_map")

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(num_classes={self.num_classes}, "
            f"ignore_index={self.ignore_index}, reduce_zero_label={self.reduce_zero_label}, "
            f"imdecode_backend={self.imdecode_backend!r})"
        )
