"""fp16 and int8 copies of an fp32 graph, checked against it on the config's val split
(docs/deploy.md)."""

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from mmengine.config import Config

from hamseg.utils.config import leaf_datasets
from hamseg.utils.errors import UsageError
from hamseg.utils.messages import one_line

from .export import onnx_session

CALIBRATION_IMAGES = 16  #: int8's activation ranges: images spread over the train split
INT8_OPS = ["Conv", "Add", "Mul", "Relu", "MaxPool"]  #: quantized outside the Hamburger block


def gate_datasets(cfg: Config, precision: str) -> tuple[Any, Any]:
    """The val dataset and, for int8, the calibration one (the train split through the val
    pipeline), built before an export; one line if a split is missing or empty."""
    from mmengine.registry import init_default_scope
    from mmseg.registry import DATASETS

    init_default_scope(cfg.get("default_scope", "mmseg"))

    def build(dataset_cfg: dict, split: str) -> Any:
        reason = "has no images"
        try:
            if len(dataset := DATASETS.build(dataset_cfg)):
                return dataset
        except (AssertionError, OSError, ValueError) as err:  # empty: mmengine's ValueError
            reason = reason if type(err) is ValueError else f"is not there ({one_line(err, 300)})"
        raise UsageError(
            f"{precision}: the check needs the config's {split} split, which {reason}: pass "
            "--cfg-options data_root=PATH"
        )

    val = build(cfg.val_dataloader.dataset, "val")
    if precision != "int8":
        return val, None
    train = next(leaf_datasets(cfg.train_dataloader.dataset))
    return val, build(dict(train, pipeline=val.pipeline.transforms), "train")


def samples(model: torch.nn.Module, dataset: Any, count: int = 0, size: Any = None) -> list:
    """(input (1, 3, H, W) as the model's data preprocessor makes it, ground truth (H, W)) of
    ``count`` samples spread over ``dataset`` (0: all); inputs resized to a static ``size``."""
    out = []
    for i in np.linspace(0, len(dataset) - 1, min(count or len(dataset), len(dataset))):
        data = model.data_preprocessor({k: [v] for k, v in dataset[round(i)].items()}, False)
        x, gt = data["inputs"].float(), data["data_samples"][0].gt_sem_seg.data[0].numpy()
        x = F.interpolate(x, tuple(size), mode="bilinear") if size is not None else x
        out.append((x.numpy(), gt))
    return out


def convert(src: str, out: str, precision: str, calibration: list[np.ndarray]) -> None:
    """Write the fp32 graph ``src`` as 'fp16' (float32 input and output) or 'int8' (ORT's static
    QOperator format, per-channel 7-bit weights, uint8 activations, the Hamburger in float)."""
    import onnx
    from onnxruntime import quantization as q
    from onnxruntime.quantization.shape_inference import quant_pre_process
    from onnxruntime.transformers.float16 import convert_float_to_float16

    if precision == "fp16":
        onnx.save(convert_float_to_float16(onnx.load(src), keep_io_types=True), out)
    else:
        quant_pre_process(src, out)  # BN folded: every Conv weight an initializer
        feeds = iter([{"input": x} for x in calibration])
        reader = type("R", (q.CalibrationDataReader,), {"get_next": lambda _: next(feeds, None)})
        q.quantize_static(
            out,
            out,
            reader(),
            quant_format=q.QuantFormat.QOperator,
            op_types_to_quantize=INT8_OPS,
            nodes_to_exclude=[n.name for n in onnx.load(out).graph.node if "/hamburger/" in n.name],
            per_channel=True,
            reduce_range=True,  # 7-bit weights: AVX2's u8 x s8 products saturate 16 bits
            activation_type=q.QuantType.QUInt8,
            weight_type=q.QuantType.QInt8,
        )
    graph = onnx.load(out)
    meta = {p.key: p.value for p in onnx.load(src, load_external_data=False).metadata_props}
    onnx.helper.set_model_props(graph, dict(meta, precision=precision))
    onnx.save(graph, out)


def compare(fp32: str, other: str, batches: list, classes: int) -> dict[str, float]:
    """The graph ``other`` against the graph ``fp32`` on ``batches``: argmax agreement over all
    pixels and of the worst image, and both val mIoUs (%, mmseg's IoUMetric)."""
    from mmseg.evaluation.metrics import IoUMetric

    maps, mious = [], []
    for path in (other, fp32):
        session, preds = onnx_session(path), []
        for x, gt in batches:
            logits = torch.from_numpy(session.run(None, {"input": x})[0])
            preds.append(F.interpolate(logits, gt.shape, mode="bilinear")[0].argmax(0))
        areas = [
            IoUMetric.intersect_and_union(p, torch.from_numpy(gt), classes, 255)
            for p, (_, gt) in zip(preds, batches)
        ]
        totals = [torch.stack(a).sum(0) for a in zip(*areas)]
        mious.append(float(100 * np.nanmean(IoUMetric.total_area_to_metrics(*totals)["IoU"])))
        maps.append(preds)
    same = [float((a == b).sum()) for a, b in zip(*maps)]
    worst = min(s / p.numel() for s, p in zip(same, maps[0]))
    agreement = sum(same) / sum(p.numel() for p in maps[0])
    return dict(agreement=agreement, worst=worst, miou=mious[0], miou_fp32=mious[1])
