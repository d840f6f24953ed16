"""The authors' released HamNet checkpoint as an mmseg checkpoint for configs/ham_voc.py.

The release (Gsunshine/Enjoy-Hamburger, seg/HamNet; VOC test 85.94 mIoU) saves
``{'net': state_dict, ...}``; its names are mapped with :data:`RELEASE_HAMNET_RULES`, checked 1:1
against the target model and loaded with ``strict=True``. The file is read with
``weights_only=True``. What tools/convert_release_checkpoint.py runs.
"""

from __future__ import annotations

import hamseg  # noqa: F401  (adapts the stack before mmengine and mmseg are imported)

# isort: split
import os
import os.path as osp

import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmseg.registry import MODELS
from torch import Tensor, nn

from hamseg.compat.checkpoint import load_checkpoint_file
from hamseg.models.release_weights import WeightMappingError, map_state_dict

#: (source prefix, target prefix): the HamNet checkpoint -> ``EncoderDecoder(ResNetV1c, HamHead)``
#: (the release's ``backbone`` is ``Sequential(conv1, bn1, relu, maxpool, layer1..4)``).
RELEASE_HAMNET_RULES: tuple[tuple[str, str], ...] = (
    ("backbone.0.", "backbone.stem."),
    ("backbone.1.", "backbone.stem.7."),
    ("backbone.4.", "backbone.layer1."),
    ("backbone.5.", "backbone.layer2."),
    ("backbone.6.", "backbone.layer3."),
    ("backbone.7.", "backbone.layer4."),
    ("squeeze.", "decode_head.squeeze."),
    ("hamburger.", "decode_head.hamburger."),
    ("align.", "decode_head.align."),
    ("fc.1.", "decode_head.conv_seg."),
)


def build_target_model(config: str) -> nn.Module:
    """The segmentor of ``config`` with its pretrained-weight init switched off (not called)."""
    cfg = Config.fromfile(config)
    init_default_scope(cfg.get("default_scope", "mmseg"))
    cfg.model.backbone.init_cfg = cfg.model.pretrained = None
    return MODELS.build(cfg.model)


def release_state_dict(obj: object) -> dict[str, Tensor]:
    """The ``'net'`` state dict of a loaded release checkpoint.

    Raises:
        WeightMappingError: ``obj`` is not a dict with a ``'net'`` state dict of tensors.
    """
    if not isinstance(obj, dict) or not isinstance(obj.get("net"), dict):
        keys = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
        raise WeightMappingError(
            f"expected the release's checkpoint format {{'net': state_dict, ...}}, got {keys}"
        )
    if bad := [k for k, v in obj["net"].items() if not isinstance(v, Tensor)]:
        raise WeightMappingError(f"'net' holds non-tensor entries: {bad}")
    return dict(obj["net"])


def convert(source: dict[str, Tensor], model: nn.Module) -> dict[str, Tensor]:
    """Map the release's names onto ``model``, load the result strictly and return it."""
    state = map_state_dict(source, model.state_dict(), RELEASE_HAMNET_RULES)
    model.load_state_dict(state, strict=True)
    return state


def convert_release_checkpoint(src: str, dst: str, config: str, config_name: str) -> int:
    """Convert the release file ``src`` into the mmseg checkpoint ``dst`` for ``config``
    (``{'state_dict', 'meta': {source, converted_by, config: config_name}}``); returns the
    number of tensors converted.

    Raises:
        FileNotFoundError: ``src`` does not exist (the message says which file it is).
        WeightMappingError: Not the release's format, or it does not fit the model; the
            message lists every offending name.
    """
    if not osp.isfile(src):
        raise FileNotFoundError(
            f"release checkpoint not found: {src} (the V2 NMF r=64 model of "
            "Gsunshine/Enjoy-Hamburger, seg/README.md, 'Checkpoints')"
        )
    source = release_state_dict(load_checkpoint_file(src))
    state = convert(source, build_target_model(config))
    os.makedirs(osp.dirname(osp.abspath(dst)), exist_ok=True)
    meta = dict(source=osp.basename(src), converted_by="tools/convert_release_checkpoint.py")
    torch.save(dict(state_dict=state, meta=dict(meta, config=config_name)), dst)
    return len(source)
