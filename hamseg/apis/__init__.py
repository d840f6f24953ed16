"""What hamseg's tools do, as functions (one module each; tools/ are front ends over them).

Exported here: mmseg.apis' entry points, loading strictly: :func:`init_model` (the one loader) and
``MMSegInferencer`` (:class:`HamSegInferencer`, built by it); mmseg's own ``show_result_pyplot``,
``RSImage``, ``RSInferencer``.
"""

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
