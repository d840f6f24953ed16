"""fp16 and int8 copies of an fp32 export, kept only within bounds of argmax agreement and val
mIoU against it on the config's val split (docs/deploy.md)."""

import contextlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from mmengine.config import Config

from hamseg.utils.config import leaf_datasets
from hamseg.utils.errors import UsageError, one_line

from .export import onnx_session

CALIBRATION_IMAGES = 16  #: int8's activation ranges: images spread over the train split
INT8_OPS = ("Conv", "Add", "Mul", "Relu", "MaxPool")  #: quantized outside FLOAT_SCOPES
#: Nodes left in float: the Hamburger block (the ham and its 1x1 convs; docs/deploy.md).
FLOAT_SCOPES = ("/hamburger/",)


def gate_datasets(cfg: Config, precision: str) -> tuple[Any, Any, str]:
    """The val dataset, the calibration one and its split (int8: train, else val), built before
    an export: a missing folder, list file ("Failed to load `ann_file`") or image is one line."""
    from mmengine.registry import init_default_scope
    from mmseg.registry import DATASETS

    init_default_scope(cfg.get("default_scope", "mmseg"))  # the pipelines' transforms

    def build(dataset_cfg: dict, split: str) -> Any:
        dataset, reason = [], "has no images"
        try:
            dataset = DATASETS.build(dataset_cfg)
        except (AssertionError, OSError, ValueError) as err:  # empty: mmengine's ValueError
            reason = reason if type(err) is ValueError else f"is not there ({one_line(err, 300)})"
        if not len(dataset):
            raise UsageError(
                f"{precision}: the check needs the config's {split} split, which {reason}: pass "
                "--cfg-options data_root=PATH"
            )
        return dataset

    val = build(cfg.val_dataloader.dataset, "val")
    train = next(leaf_datasets((cfg.get("train_dataloader") or {}).get("dataset")), None)
    if precision == "int8" and train is not None:
        with contextlib.suppress(UsageError):  # read through the val pipeline: no augmentation
            return val, build(dict(train, pipeline=val.pipeline.transforms), "train"), "train"
    return val, val, "val"


def samples(model: torch.nn.Module, dataset: Any, count: int = 0, size: Any = None) -> list[tuple]:
    """(input (1, 3, H, W) float32 from the model's data preprocessor, ground truth (H, W)) of
    ``count`` samples spread over ``dataset`` (0: all); inputs resized to a static graph's size."""
    out = []
    for i in np.linspace(0, len(dataset) - 1, min(count or len(dataset), len(dataset))):
        data = model.data_preprocessor({k: [v] for k, v in dataset[round(i)].items()}, False)
        x, gt = data["inputs"].float(), data["data_samples"][0].gt_sem_seg.data[0].numpy()
        x = F.interpolate(x, tuple(size), mode="bilinear") if size is not None else x
        out.append((x.numpy(), gt))
    return out


def convert(src: str, out: str, precision: str, calibration: list[np.ndarray]) -> None:
    """Write the fp32 graph ``src`` at ``precision``: 'fp16' (float32 input and output) or 'int8'
    (ORT's static QOperator format, per-channel 7-bit weights, uint8 activations)."""
    import onnx
    from onnxruntime import quantization as q
    from onnxruntime.quantization.shape_inference import quant_pre_process

    if precision == "fp16":
        from onnxruntime.transformers.float16 import convert_float_to_float16

        onnx.save(convert_float_to_float16(onnx.load(src), keep_io_types=True), out)
    else:
        quant_pre_process(src, out)  # BN folded: every Conv weight an initializer
    if precision == "int8":
        feeds = iter([{"input": x} for x in calibration])
        reader = type("R", (q.CalibrationDataReader,), {"get_next": lambda _: next(feeds, None)})
        floats = [
            n.name for n in onnx.load(out).graph.node if any(s in n.name for s in FLOAT_SCOPES)
        ]
        q.quantize_static(
            out,
            out,
            reader(),
            quant_format=q.QuantFormat.QOperator,
            op_types_to_quantize=list(INT8_OPS),
            nodes_to_exclude=floats,
            per_channel=True,
            reduce_range=True,  # 7-bit weights: AVX2's u8 x s8 products saturate 16 bits
            activation_type=q.QuantType.QUInt8,
            weight_type=q.QuantType.QInt8,
        )
    graph = onnx.load(out)
    meta = {p.key: p.value for p in onnx.load(src, load_external_data=False).metadata_props}
    onnx.helper.set_model_props(graph, dict(meta, precision=precision))
    onnx.save(graph, out)


@dataclass(frozen=True)
class Agreement:
    """Against fp32 on the val split: argmax agreement (all pixels, worst image), mIoU (%)."""

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

    def missed(self, min_agreement: float, min_worst: float, max_drop: float) -> list[str]:
        """The bounds it misses, each named by its option of tools/deploy/export_onnx.py."""
        drop = self.miou_fp32 - self.miou
        out = [f"agreement below --min-agreement {min_agreement:g}"] * (
            self.agreement < min_agreement
        )
        out += [f"worst image below --min-worst-agreement {min_worst:g}"] * (self.worst < min_worst)
        return out + [f"mIoU drop {drop:.2f} above --max-miou-drop {max_drop:g}"] * (
            drop > max_drop
        )


def predictions(path: str, batches: list) -> list[np.ndarray]:
    """The graph's argmax of each (input, ground truth), at the ground truth's size (bilinear)."""
    session, out = onnx_session(path), []
    for x, gt in batches:
        logits = torch.from_numpy(session.run(None, {"input": x})[0])
        out.append(F.interpolate(logits, gt.shape, mode="bilinear")[0].argmax(0).numpy())
    return out


def miou(preds: list[np.ndarray], batches: list, classes: int, ignore: int = 255) -> float:
    """Val mIoU (%) of argmax maps against the ground truth of ``batches``, by mmseg's IoUMetric."""
    from mmseg.evaluation.metrics import IoUMetric

    areas = [
        IoUMetric.intersect_and_union(torch.from_numpy(p), torch.from_numpy(gt), classes, ignore)
        for p, (_, gt) in zip(preds, batches)
    ]
    totals = [torch.stack(a).sum(0) for a in zip(*areas)]
    return float(100 * np.nanmean(IoUMetric.total_area_to_metrics(*totals)["IoU"]))


def compare(fp32: Any, other: str, precision: str, batches: list, classes: int) -> Agreement:
    """:class:`Agreement` of the graph ``other`` with ``fp32`` (a path, or its predictions)."""
    reference = predictions(fp32, batches) if isinstance(fp32, str) else fp32
    preds = predictions(other, batches)
    same = [float(np.sum(a == b)) for a, b in zip(reference, preds)]
    worst = min(s / p.size for s, p in zip(same, preds))
    mious = (miou(p, batches, classes) for p in (preds, reference))
    return Agreement(precision, sum(same) / sum(p.size for p in preds), worst, *mious)
