"""The int8 recipe: static QDQ quantization of the convolutions that pay on ONNX Runtime's CPU
kernels, everything else (the ham, GELU, normalisations) left in float (docs/deploy.md)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

#: Node names of a ham (hamseg's export names every node of ``...hamburger.ham`` so).
HAM_SCOPE = "/hamburger/ham/"


@dataclass(frozen=True)
class Recipe:
    """What :func:`quantize_int8` quantizes and how.

    Attributes:
        op_types: ONNX operator types to quantize (outside the ham).
        depthwise: Whether depthwise convolutions (group == channels) are quantized.
        per_channel: Per-output-channel weight scales.
        activations: 'uint8' or 'int8' activations (weights are int8).
        fuse_gelu: Fuse erf-GELU into ORT's Gelu before quantizing, so that it stays one float
            operator between a DequantizeLinear and a QuantizeLinear.
        qdq: QDQ format (ORT fuses DequantizeLinear-op-QuantizeLinear into its int8 kernels when
            it loads the graph); False: QOperator (QLinearConv etc. written directly).
        extra_options: ``quantize_static``'s ``extra_options``.
    """

    op_types: Sequence[str] = ("Conv",)
    depthwise: bool = False
    per_channel: bool = True
    activations: str = "uint8"
    fuse_gelu: bool = True
    qdq: bool = True
    extra_options: dict = field(default_factory=dict)


def float_nodes(model: object, recipe: Recipe) -> list[str]:
    """Names of the nodes the recipe leaves in float: the ham's, and the depthwise convolutions
    unless ``recipe.depthwise``."""
    weights = {t.name: t for t in model.graph.initializer}
    names = []
    for node in model.graph.node:
        if HAM_SCOPE in node.name:
            names.append(node.name)
        elif node.op_type == "Conv" and not recipe.depthwise:
            group = next((a.i for a in node.attribute if a.name == "group"), 1)
            weight = weights.get(node.input[1])
            if group > 1 and weight is not None and weight.dims[1] == 1:  # one input channel
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
