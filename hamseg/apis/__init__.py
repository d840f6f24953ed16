"""What hamseg's tools do, as functions (one module each; tools/ are front ends over them).

Exported here: mmseg's Python API with strict loading (:func:`init_model`, the one loader).
"""

from .checkpoint import CheckpointMismatchError
from .inference import HamSegInferencer, inference_model, init_model

__all__ = ["CheckpointMismatchError", "HamSegInferencer", "inference_model", "init_model"]
