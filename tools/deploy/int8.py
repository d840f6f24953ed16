"""The int8 recipe: static quantization (ORT's QOperator format, uint8 activations, per-channel
int8 weights) of convolutions, residual additions, products, ReLU and max-pooling, with the ham
and GELU left in float; the choices and their measurements: docs/deploy.md, docs/reports/."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

#: Node names of a ham (hamseg's export names every node of ``...hamburger.ham`` so).
HAM_SCOPE = "/hamburger/ham/"


@dataclass(frozen=True)
class Recipe:
    """What :func:`quantize_int8` quantizes and how; the defaults are the measured fastest that
    keep the demo models' quality (docs/deploy.md).

    Attributes:
        op_types: ONNX operator types to quantize, outside the ham (with its products in int8
            the demo model's argmax agreed with fp32 on 77% of val pixels).
        depthwise: The largest kernel area (kh * kw) of a depthwise convolution that is
            quantized, larger ones stay in float; None: all are quantized.
        per_channel: Per-output-channel weight scales.
        activations: 'uint8' or 'int8' activations; weights are int8 (x86's fast u8 x s8).
        fuse_gelu: Fuse erf-GELU into ORT's ``Gelu`` first, so that it stays one float
            operator instead of five between the int8 convolutions.
        qdq: QDQ format (ORT fuses DequantizeLinear-op-QuantizeLinear into its int8 kernels when
            it loads the graph); False: QOperator (QLinearConv etc. written directly).
        extra_options: ``quantize_static``'s ``extra_options``.
    """

    op_types: Sequence[str] = ("Conv", "Add", "Mul", "Relu", "MaxPool")
    depthwise: Optional[int] = None
    per_channel: bool = True
    activations: str = "uint8"
    fuse_gelu: bool = True
    qdq: bool = False
    extra_options: dict = field(default_factory=dict)


def float_nodes(model: Any, recipe: Recipe) -> list[str]:
    """Names of the nodes the recipe leaves in float: the ham's, and the depthwise convolutions
    (one input channel per group) with kernels larger than ``recipe.depthwise``."""
    weights = {t.name: t for t in model.graph.initializer}
    names = []
    for node in model.graph.node:
        weight = weights.get(node.input[1]) if node.op_type == "Conv" else None
        depthwise = weight is not None and weight.dims[1] == 1 and weight.dims[0] > 1
        limit = recipe.depthwise
        large = depthwise and limit is not None and np.prod(weight.dims[2:]) > limit
        if HAM_SCOPE in node.name or large:
            names.append(node.name)
    return names


def fuse_gelu(path: str) -> int:
    """Replace erf-GELU subgraphs of the ONNX file by ORT's ``Gelu``; returns how many."""
    import onnx
    from onnxruntime.transformers.fusion_gelu import FusionGelu
    from onnxruntime.transformers.onnx_model import OnnxModel

    model = OnnxModel(onnx.load(path))
    before = len(model.get_nodes_by_op_type("Gelu"))
    FusionGelu(model).apply()
    model.prune_graph()
    onnx.save(model.model, path)
    return len(model.get_nodes_by_op_type("Gelu")) - before


def quantize_int8(
    src: str, out: str, calibration: Sequence[np.ndarray], recipe: Recipe = Recipe()
) -> None:
    """Write ``src`` (fp32) quantized by ``recipe``, activation ranges (min/max) from the
    ``calibration`` inputs (normalised (1, 3, H, W) float32)."""
    import onnx
    from onnxruntime import quantization as q
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory() as tmp:
        prepared = os.path.join(tmp, "prepared.onnx")
        quant_pre_process(src, prepared)  # shape inference, BN folded: Conv weights constant
        if recipe.fuse_gelu:
            fuse_gelu(prepared)
        feeds = iter([{"input": x} for x in calibration])
        next_feed = {"get_next": lambda _: next(feeds, None)}
        reader = type("Reader", (q.CalibrationDataReader,), next_feed)
        activation = q.QuantType.QUInt8 if recipe.activations == "uint8" else q.QuantType.QInt8
        q.quantize_static(
            prepared,
            out,
            reader(),
            quant_format=q.QuantFormat.QDQ if recipe.qdq else q.QuantFormat.QOperator,
            op_types_to_quantize=list(recipe.op_types),
            nodes_to_exclude=float_nodes(onnx.load(prepared), recipe),
            per_channel=recipe.per_channel,
            activation_type=activation,
            weight_type=q.QuantType.QInt8,
            extra_options=dict(recipe.extra_options),
        )
