"""mmseg.apis with strict checkpoint loading: ``MMSegInferencer`` is :class:`HamSegInferencer`."""

from mmseg.apis import RSImage, RSInferencer, inference_model, show_result_pyplot

from .checkpoint import CheckpointMismatchError
from .inference import HamSegInferencer, init_model

MMSegInferencer = HamSegInferencer
__all__ = ["CheckpointMismatchError", "HamSegInferencer", "MMSegInferencer", "RSImage"]
__all__ += ["RSInferencer", "inference_model", "init_model", "show_result_pyplot"]
