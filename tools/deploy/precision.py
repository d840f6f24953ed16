"""fp16 and int8 graphs, checked against fp32 on the val split (docs/deploy.md): what
tools/deploy/export_onnx.py's ``--precision`` and ``--quantize`` run."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import cv2
import numpy as np
from torch import nn

from hamseg.apis.export import ExportError, finish_graph, onnx_session
from hamseg.utils.config import leaf_datasets
from hamseg.utils.errors import UsageError

from .int8 import quantize_int8

PRECISIONS = ("fp16", "int8", "int8-dynamic")
#: Images int8's activation ranges are calibrated on (8 and all 100 demo images gave the same
#: agreement within 0.01 points).
CALIBRATION_IMAGES = 16


def _batches(model: nn.Module, dataset_cfg: dict, indices: Any) -> Iterator[tuple]:
    """(normalised (1, 3, H, W) float32 input, (H, W) ground truth) of the dataset's samples
    ``indices(len(dataset))``, through the model's data preprocessor in test mode.

    Raises:
        UsageError: The dataset's files are not there.
    """
    from mmseg.registry import DATASETS

    try:
        dataset = DATASETS.build(dataset_cfg)
    except FileNotFoundError as err:
        raise UsageError(
            f"the check against fp32 needs the config's val split (and int8 its train split, "
            f"else val), which is not there ({err}): pass --cfg-options data_root=PATH (or "
            "val_dataloader.dataset.data_root=PATH)"
        ) from None
    for i in indices(len(dataset)):
        data = model.data_preprocessor({k: [v] for k, v in dataset[i].items()}, False)
        gt = data["data_samples"][0].gt_sem_seg.data[0].numpy()
        yield data["inputs"].numpy().astype(np.float32), gt


def val_batches(model: nn.Module, limit: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The config's val split through its pipeline (``limit``: the first N; 0: all), as
    :func:`_batches`."""
    first = lambda n: range(min(limit or n, n))  # noqa: E731
    return _batches(model, model.cfg.val_dataloader.dataset, first)


def calibration_inputs(model: nn.Module, count: int = CALIBRATION_IMAGES) -> tuple[list, str]:
    """``count`` inputs spread evenly over the config's train split, read through the val
    pipeline (no augmentation), and the split's name; the val split's if the train split is not
    there, so that the int8 graph is not checked on the images it was calibrated on."""
    pipeline = model.cfg.val_dataloader.dataset.get("pipeline")
    train = next(leaf_datasets((model.cfg.get("train_dataloader") or {}).get("dataset")), None)
    spread = lambda n: np.linspace(0, n - 1, min(count, n)).round().astype(int)  # noqa: E731
    if train is not None:
        with contextlib.suppress(UsageError):  # not there: the val split's
            return [x for x, _ in _batches(model, dict(train, pipeline=pipeline), spread)], "train"
    return [x for x, _ in _batches(model, model.cfg.val_dataloader.dataset, spread)], "val"


def fit(batches: list, shape: Optional[Sequence[int]]) -> list:
    """``batches`` for a graph that takes only (H, W) = ``shape`` (exported without --dynamic):
    inputs resized bilinearly, ground truth by nearest neighbour; unchanged if ``shape`` is
    None or already theirs."""
    import torch
    import torch.nn.functional as F

    out = []
    for x, gt in batches:
        if shape is not None and tuple(x.shape[2:]) != tuple(shape):
            x = F.interpolate(torch.from_numpy(x), size=tuple(shape), mode="bilinear").numpy()
            gt = cv2.resize(gt, tuple(shape)[::-1], interpolation=cv2.INTER_NEAREST)
        out.append((x, gt))
    return out


def convert(src: str, out: str, precision: str, calibration: list[np.ndarray]) -> None:
    """Write ``src`` (fp32) at ``precision``: 'fp16' (float32 input/output kept), 'int8'
    (:func:`~.int8.quantize_int8`, activation ranges from the ``calibration`` inputs) or
    'int8-dynamic' (ORT's ``quantize_dynamic``, int8 weights, slower than fp32 on CPUs)."""
    import onnx

    if precision == "fp16":
        from onnxruntime.transformers.float16 import convert_float_to_float16

        onnx.save(convert_float_to_float16(onnx.load(src), keep_io_types=True), out)
    elif precision == "int8":
        quantize_int8(src, out, calibration)
    else:
        from onnxruntime import quantization as q
        from onnxruntime.quantization.shape_inference import quant_pre_process

        quant_pre_process(src, out)  # ORT's folding: every Conv weight an initializer
        q.quantize_dynamic(out, out, weight_type=q.QuantType.QInt8)
    session = onnx_session(src)  # the fp32 graph's class count and metadata
    meta = session.get_modelmeta().custom_metadata_map
    finish_graph(out, session.get_outputs()[0].shape[1], dict(meta, precision=precision))


@dataclass(frozen=True)
class Agreement:
    """A converted graph against fp32 on the val split: argmax agreement over all pixels and
    of the worst image, val mIoU (%) of both."""

    precision: str
    agreement: float
    worst: float
    miou: float
    miou_fp32: float

    def line(self) -> str:
        return (
            f"{self.precision}: argmax agreement with fp32 {100 * self.agreement:.2f}% (worst "
            f"image {100 * self.worst:.2f}%), val mIoU {self.miou:.2f} (fp32 "
            f"{self.miou_fp32:.2f}, drop {round(self.miou_fp32 - self.miou, 2) + 0.0:.2f})"
        )


def miou(confusion: np.ndarray) -> float:
    """Mean IoU (%) of a (K, K) confusion matrix over classes with a non-empty union."""
    inter = np.diag(confusion)
    union = confusion.sum(0) + confusion.sum(1) - np.diag(confusion)
    return float(100 * np.mean(inter[union > 0] / union[union > 0]))


def _argmax(session: Any, batches: list) -> list[np.ndarray]:
    return [session.run(None, {"input": x})[0][0].argmax(0) for x, _ in batches]


def predictions(path: str, batches: list) -> list[np.ndarray]:
    """The argmax (H, W) of the graph at ``path`` for each of ``batches`` (:func:`val_batches`)."""
    return _argmax(onnx_session(path), batches)


def val_miou(preds: list[np.ndarray], batches: list, classes: int, ignore: int = 255) -> float:
    """Val mIoU (%) of the argmax maps ``preds`` against the ground truth of ``batches``."""
    confusion = np.zeros((classes, classes), np.int64)
    for pred, (_, gt) in zip(preds, batches):
        valid = gt != ignore
        confusion += np.bincount(gt[valid] * classes + pred[valid], minlength=classes**2).reshape(
            classes, classes
        )
    return miou(confusion)


def compare(fp32: str | list[np.ndarray], other: str, precision: str, batches: list) -> Agreement:
    """:class:`Agreement` of ``other`` with ``fp32`` on ``batches`` (:func:`val_batches`);
    ``fp32``: the graph's path, or its :func:`predictions` when several graphs are compared."""
    session = onnx_session(other)
    k = session.get_outputs()[0].shape[1]
    reference = predictions(fp32, batches) if isinstance(fp32, str) else fp32
    preds = _argmax(session, batches)
    agree = [np.mean(a == b) for a, b in zip(reference, preds)]
    overall = sum(float(np.sum(a == b)) for a, b in zip(reference, preds))
    overall /= sum(a.size for a in preds)
    mious = (val_miou(p, batches, k) for p in (preds, reference))
    return Agreement(precision, overall, float(min(agree)), *mious)


@dataclass(frozen=True)
class Gates:
    """Bounds a converted graph must keep against fp32 on the val split.

    Attributes:
        min_agreement: Argmax agreement over all pixels.
        min_worst: Argmax agreement of the worst image.
        max_miou_drop: Val mIoU points lost.
    """

    min_agreement: float = 0.99
    min_worst: float = 0.95
    max_miou_drop: float = 0.5


def check_gates(result: Agreement, out: str, gates: Gates) -> None:
    """Remove ``out`` and raise one line naming every bound of ``gates`` it misses."""
    missed = []
    if result.agreement < gates.min_agreement:
        missed.append(f"agreement below --min-agreement {gates.min_agreement:g}")
    if result.worst < gates.min_worst:
        missed.append(f"worst image below --min-worst-agreement {gates.min_worst:g}")
    if result.miou_fp32 - result.miou > gates.max_miou_drop:
        drop = result.miou_fp32 - result.miou
        missed.append(f"mIoU drop {drop:.2f} above --max-miou-drop {gates.max_miou_drop:g}")
    if missed:
        os.remove(out)
        raise ExportError(
            f"{out}: {result.line()}: {', '.join(missed)}; the file was removed (use another "
            "--precision, or loosen the bound to keep it)"
        )
