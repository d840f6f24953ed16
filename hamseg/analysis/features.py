"""The input Z and output Y of a block (by default the Hamburger) for each image, by a forward hook.

Both analyses of the paper's Sec. 4 / appendix read these: the singular-value spectrum (Fig. 5,
:mod:`hamseg.analysis.spectrum`) and the feature maps (Fig. 6, :mod:`hamseg.analysis.feature_maps`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
from torch import Tensor, nn

from hamseg.apis.images import read_image_rgb
from hamseg.apis.inference import predict_label
from hamseg.utils.errors import UsageError

__all__ = ["MissingModuleError", "capture_features", "get_module"]

#: The block both analyses look at in a HamHead model.
HAMBURGER = "decode_head.hamburger"


class MissingModuleError(UsageError):
    """The model has no module of the requested name."""


def get_module(model: nn.Module, name: str) -> nn.Module:
    """The submodule ``name`` (dotted path) of ``model``.

    Raises:
        MissingModuleError: If there is no such module (e.g. an FCN checkpoint has no
            Hamburger); the message lists the model's head modules.
    """
    modules = dict(model.named_modules())
    if name not in modules:
        raise MissingModuleError(
            f"the model has no module {name!r} (is this a HamHead checkpoint?); pass --module "
            "with one of: " + ", ".join(n for n in modules if n.startswith("decode_head"))
        )
    return modules[name]


def capture_features(
    model: nn.Module, module_name: str, paths: Sequence[str], progress: bool = True
) -> Iterator[tuple[str, np.ndarray, Tensor, Tensor, np.ndarray]]:
    """Yield ``(path, rgb image, Z, Y, prediction)`` for each image: the input and output of the
    module for the first sample, (C, H, W) float32 on the CPU, and the predicted label map."""
    from tqdm import tqdm

    module = get_module(model, module_name)
    store: dict[str, Tensor] = {}

    def hook(_m: nn.Module, inputs: tuple, output: Tensor) -> None:
        store["z"] = inputs[0].detach()[0].float().cpu()
        store["y"] = output.detach()[0].float().cpu()

    handle = module.register_forward_hook(hook)
    try:
        for path in tqdm(paths, desc="features", unit="img", disable=not progress):
            img = read_image_rgb(path)
            pred = predict_label(model, img)
            yield path, img, store["z"], store["y"], pred
    finally:
        handle.remove()
