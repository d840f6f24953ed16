"""What hamseg's tools do, as functions: load a checkpoint strictly, segment images, draw overlays,
run the CPU demo and its head comparison, convert the authors' released checkpoint; and mmseg's
Python API (``init_model``, ``inference_model``, ``HamSegInferencer``: mmseg's
``MMSegInferencer``) with checkpoints loaded strictly.

Every ``tools/`` script is a command-line front end over these (see each module).
"""

from .checkpoint import (
    CheckpointMismatchError,
    check_checkpoint_file,
    check_state_dict,
    load_checkpoint_strict,
    load_state_dict_strict,
    reinitialised_by_load_from,
)
from .images import IMAGE_EXTENSIONS, ImageDecodeError, collect_inputs, read_image_rgb
from .inference import (
    InferenceReport,
    class_info,
    init_segmentor,
    output_name,
    predict_label,
    segment_images,
)
from .mmseg_api import HamSegInferencer, inference_model, init_model, resolve_model_name
from .overlay import draw_overlay

__all__ = [
    "IMAGE_EXTENSIONS",
    "CheckpointMismatchError",
    "HamSegInferencer",
    "ImageDecodeError",
    "InferenceReport",
    "check_checkpoint_file",
    "check_state_dict",
    "class_info",
    "collect_inputs",
    "draw_overlay",
    "inference_model",
    "init_model",
    "init_segmentor",
    "load_checkpoint_strict",
    "load_state_dict_strict",
    "output_name",
    "predict_label",
    "read_image_rgb",
    "reinitialised_by_load_from",
    "resolve_model_name",
    "segment_images",
]
