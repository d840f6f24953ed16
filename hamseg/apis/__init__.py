"""mmseg.apis' entry points, loading checkpoints strictly: :func:`init_model` and
``MMSegInferencer`` (:class:`HamSegInferencer`, built by it); mmseg's own ``inference_model``,
``show_result_pyplot``, ``RSImage``, ``RSInferencer``."""

from mmseg.apis import RSImage, RSInferencer, show_result_pyplot

from .checkpoint import CheckpointMismatchError
from .inference import HamSegInferencer, inference_model, init_model

MMSegInferencer = HamSegInferencer

__all__ = [
    "CheckpointMismatchError",
    "HamSegInferencer",
    "MMSegInferencer",
    "RSImage",
    "RSInferencer",
    "inference_model",
    "init_model",
    "show_result_pyplot",
]
