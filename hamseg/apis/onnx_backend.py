"""Run an exported ONNX model where hamseg runs a segmentor (``tools/infer.py --backend``).

:func:`use_onnxruntime` keeps the PyTorch segmentor for everything around the network (mmseg's
test pipeline, data preprocessor, whole/slide inference, resizing back to the image) and
replaces its ``encode_decode`` by an ONNX Runtime session of the exported graph, which takes
and returns exactly what ``encode_decode`` does (:mod:`hamseg.apis.export`). The label maps
then differ from PyTorch's only by what the two runtimes compute differently. The segmentor's
own weights are never used: it may be built from a config alone
(:func:`~hamseg.apis.inference.init_segmentor_from_config`). Its class names must be those of
the graph: a graph whose logits have another channel count is refused with one line.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor, nn

from hamseg.utils.errors import UsageError, require_file
from hamseg.utils.messages import first_items, one_line

from .export import onnx_session
from .inference import class_info

__all__ = ["use_onnxruntime"]


def use_onnxruntime(
    segmentor: nn.Module,
    onnx_file: str,
    threads: int = 0,
    names_from: Optional[tuple[str, str]] = None,
) -> nn.Module:
    """Make ``segmentor`` compute its logits with ONNX Runtime (in place; returned).

    The graph's ``logits`` output (else its only output) must have as many channels as the
    segmentor has class names (:func:`~hamseg.apis.inference.class_info`): checked here when the
    graph's shape says it, else at the first run.

    Args:
        segmentor: The segmentor whose pipeline, preprocessing and class names are used.
        onnx_file: The exported graph (tools/deploy/export_onnx.py).
        threads: ONNX Runtime's intra-op threads (0: its default).
        names_from: Where the class names come from, for the mismatch message: (kind, file),
            e.g. ``("config", "configs/x.py")`` or ``("checkpoint", "m.pth")``.

    Raises:
        UsageError: The file is missing or not a graph ONNX Runtime loads, onnxruntime is not
            installed, the graph's class count differs from the class names', or the graph does
            not take the input size (exported without ``--dynamic``).
    """
    require_file(onnx_file, "ONNX model")
    try:
        session = onnx_session(onnx_file, threads)
    except UsageError:
        raise
    except Exception as err:  # onnxruntime's own exception types
        raise UsageError(
            f"{onnx_file}: ONNX Runtime cannot load it ({one_line(err, 200)}); export the model "
            "with tools/deploy/export_onnx.py"
        ) from None
    inputs, outputs = session.get_inputs(), session.get_outputs()
    if len(inputs) != 1:
        raise UsageError(
            f"{onnx_file}: the graph takes {len(inputs)} inputs, not the one image tensor of "
            "tools/deploy/export_onnx.py"
        )
    (expected,) = inputs
    logits_at = next((i for i, o in enumerate(outputs) if o.name == "logits"), 0)
    classes, _ = class_info(segmentor)

    def check_classes(channels: Any) -> None:
        if channels == len(classes):
            return
        shown = first_items(classes, 8)
        kind, path = names_from or ("model", "")
        raise UsageError(
            f"{onnx_file} gives {channels} classes but the {kind}{' ' + path if path else ''} "
            f"names {len(classes)} ({shown}): export the model of this {kind} "
            f"(tools/deploy/export_onnx.py), or pass the {kind} {onnx_file} was exported from"
        )

    shape = outputs[logits_at].shape if outputs else []
    static = len(shape) > 1 and isinstance(shape[1], int)
    if static:
        check_classes(shape[1])
    checked = [static]

    def encode_decode(inputs: Tensor, batch_img_metas: Any = None) -> Tensor:
        array = inputs.detach().cpu().numpy().astype(np.float32)
        try:
            logits = session.run(None, {expected.name: array})[logits_at]
        except Exception as err:  # onnxruntime's own exception types
            raise UsageError(
                f"{onnx_file}: ONNX Runtime cannot run an input of shape {tuple(array.shape)} "
                f"(the graph takes {expected.shape}; export with --dynamic for any size): "
                f"{one_line(err, 200)}"
            ) from None
        if not checked[0]:
            check_classes(logits.shape[1] if logits.ndim > 1 else None)
            checked[0] = True
        return torch.from_numpy(logits).to(inputs.device)

    segmentor.encode_decode = encode_decode
    return segmentor
