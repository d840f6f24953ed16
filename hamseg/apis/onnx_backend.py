"""Run an exported ONNX model where hamseg runs a segmentor (``tools/infer.py --backend``).

:func:`use_onnxruntime` keeps the PyTorch segmentor for everything around the network (mmseg's
test pipeline, data preprocessor, whole/slide inference, resizing back to the image) and
replaces its ``encode_decode`` by an ONNX Runtime session of the exported graph, which takes
and returns exactly what ``encode_decode`` does (:mod:`hamseg.apis.export`). The label maps
then differ from PyTorch's only by what the two runtimes compute differently.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from hamseg.utils.cli import CLIError, require_file

from .export import onnx_session

__all__ = ["use_onnxruntime"]


def use_onnxruntime(segmentor: nn.Module, onnx_file: str, threads: int = 0) -> nn.Module:
    """Make ``segmentor`` compute its logits with ONNX Runtime (in place; returned).

    Raises:
        CLIError: The file is missing, onnxruntime is not installed, or the graph does not take
            the input size (exported without ``--dynamic``).
    """
    session = onnx_session(require_file(onnx_file, "ONNX model"), threads)
    (expected,) = session.get_inputs()

    def encode_decode(inputs: Tensor, batch_img_metas: Any = None) -> Tensor:
        array = inputs.detach().cpu().numpy().astype(np.float32)
        try:
            (logits,) = session.run(None, {expected.name: array})
        except Exception as err:  # onnxruntime's own exception types
            raise CLIError(
                f"{onnx_file}: ONNX Runtime cannot run an input of shape {tuple(array.shape)} "
                f"(the graph takes {expected.shape}; export with --dynamic for any size): "
                f"{' '.join(str(err).split())[:200]}"
            ) from None
        return torch.from_numpy(logits).to(inputs.device)

    segmentor.encode_decode = encode_decode
    return segmentor
