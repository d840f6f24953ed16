"""Weights of the authors' release (Gsunshine/Enjoy-Hamburger, seg/HamNet) in mmseg's layout.

The release's ImageNet ResNet-101 (deep stem, ``conv1.{0,1,3,4,6}``, ``bn1``, ``layer1..4``,
``fc``) maps by prefix rules onto mmseg's ``ResNetV1c(stem_channels=128)``
(:class:`HamResNetPretrained`, the recipes' ``init_cfg``); :func:`map_state_dict` checks that a
mapping is 1:1 (the HamNet checkpoint's rules: tools/model_converters/release_checkpoint.py).
"""

from __future__ import annotations

import os
import os.path as osp
from collections.abc import Mapping, Sequence

import torch
from mmengine.logging import print_log
from mmengine.model.weight_init import update_init_info
from mmseg.registry import WEIGHT_INITIALIZERS
from torch import Tensor, nn

from hamseg.compat.checkpoint import load_checkpoint_file

__all__ = [
    "IMAGENET_RESNET_RULES",
    "HamResNetPretrained",
    "WeightMappingError",
    "load_torch_file",
    "map_state_dict",
    "unwrap_state_dict",
]

#: (source prefix, target prefix): the ImageNet file -> mmseg ``ResNet`` with ``deep_stem=True``.
IMAGENET_RESNET_RULES: tuple[tuple[str, str], ...] = (
    ("conv1.0.", "stem.0."),
    ("conv1.1.", "stem.1."),
    ("conv1.3.", "stem.3."),
    ("conv1.4.", "stem.4."),
    ("conv1.6.", "stem.6."),
    ("bn1.", "stem.7."),
    ("layer1.", "layer1."),
    ("layer2.", "layer2."),
    ("layer3.", "layer3."),
    ("layer4.", "layer4."),
)
#: Source prefixes of the ImageNet file that a segmentation backbone does not use.
IMAGENET_RESNET_DROP: tuple[str, ...] = ("fc.",)

#: Wrapper keys under which checkpoints commonly store their state dict.
_WRAPPER_KEYS = ("net", "state_dict", "model")


class WeightMappingError(KeyError):
    """A state dict does not map 1:1 onto its target; the message lists every offending name."""

    def __str__(self) -> str:  # KeyError would repr() the message and escape the newlines
        return str(self.args[0]) if self.args else ""


def load_torch_file(path: str) -> object:
    """Load ``path`` on CPU with ``weights_only=True`` (an unsafe file is refused)."""
    return load_checkpoint_file(path, map_location="cpu")


def unwrap_state_dict(obj: object, keys: Sequence[str] = _WRAPPER_KEYS) -> dict[str, Tensor]:
    """The ``{name: tensor}`` dict in a loaded checkpoint (itself, or under the first of
    ``keys`` it has), without a DataParallel ``module.`` prefix; TypeError if there is none."""
    if isinstance(obj, Mapping):
        for key in keys:
            if key in obj and isinstance(obj[key], Mapping):
                obj = obj[key]
                break
    if not isinstance(obj, Mapping) or not all(isinstance(v, Tensor) for v in obj.values()):
        raise TypeError(
            "expected a state dict of tensors, or a dict holding one under one of "
            f"{list(keys)}; got {type(obj).__name__}"
            + (f" with keys {sorted(obj)[:10]}" if isinstance(obj, Mapping) else "")
        )
    prefix = "module."
    if obj and all(k.startswith(prefix) for k in obj):
        return {k[len(prefix) :]: v for k, v in obj.items()}
    return dict(obj)


def _rename(name: str, rules: Sequence[tuple[str, str]]) -> str | None:
    """Target name of ``name`` under the longest matching source prefix, or None."""
    best = None
    for src, dst in rules:
        if name.startswith(src) and (best is None or len(src) > len(best[0])):
            best = (src, dst)
    return None if best is None else best[1] + name[len(best[0]) :]


def _listing(title: str, names: Sequence[str]) -> str:
    return f"{title} ({len(names)}):\n" + "\n".join(f"  {n}" for n in names)


def map_state_dict(
    source: Mapping[str, Tensor],
    target: Mapping[str, Tensor],
    rules: Sequence[tuple[str, str]],
    drop: Sequence[str] = (),
    fill_num_batches_tracked: bool = False,
) -> dict[str, Tensor]:
    """Rename ``source`` into the names of ``target`` and check the result is a bijection.

    Args:
        source: State dict to convert.
        target: State dict of the module that will load it (names and shapes are checked).
        rules: ``(source prefix, target prefix)`` pairs; the longest matching prefix wins.
        drop: Source prefixes left unused on purpose (e.g. an ImageNet classifier).
        fill_num_batches_tracked: Fill missing BatchNorm ``num_batches_tracked`` with 0.

    Raises:
        WeightMappingError: Listing every name that does not map 1:1 and every shape mismatch.
    """
    mapped: dict[str, Tensor] = {}
    origin: dict[str, str] = {}
    unmatched = []
    collisions = []
    unknown = []
    bad_shapes = []
    for name, tensor in source.items():
        if any(name.startswith(p) for p in drop):
            continue
        new = _rename(name, rules)
        if new is None:
            unmatched.append(name)
        elif new in mapped:
            collisions.append(f"{origin[new]} and {name} -> {new}")
        elif new not in target:
            unknown.append(f"{name} -> {new}")
        else:
            if tuple(tensor.shape) != tuple(target[new].shape):
                bad_shapes.append(
                    f"{name} {tuple(tensor.shape)} -> {new} {tuple(target[new].shape)}"
                )
            mapped[new] = tensor
            origin[new] = name
    missing = [k for k in target if k not in mapped]
    if fill_num_batches_tracked:
        for k in [k for k in missing if k.endswith(".num_batches_tracked")]:
            mapped[k] = torch.zeros_like(target[k])
        missing = [k for k in missing if k not in mapped]
    problems = [
        (unmatched, "source tensors that no rule maps (unused)"),
        (unknown, "source tensors whose mapped name is not in the target"),
        (collisions, "target tensors that two sources map to"),
        (missing, "target tensors that no source fills"),
        (bad_shapes, "shape mismatches (source -> target)"),
    ]
    if any(names for names, _ in problems):
        raise WeightMappingError(
            "the state dict does not map 1:1 onto the target:\n"
            + "\n".join(_listing(title, names) for names, title in problems if names)
        )
    return {k: mapped[k] for k in target}


PRETRAINED_HELP = (
    "The release fine-tunes an ImageNet ResNet with the deep stem (3x3 convs 3->64->64->128), "
    "published with the authors' code (Gsunshine/Enjoy-Hamburger, seg/README.md, section "
    "'Pretrained Backbone': Google Drive folder "
    "https://drive.google.com/drive/folders/1FXwv1j-qYu2x8dLCvTVWJjAuWyp_Gq_I or Baidu "
    "Netdisk). Put the file at {path} (see docs/recipes.md, 'Pretrained backbone'). Without "
    "it, use the variant on mmseg's standard backbone (configs/ham_voc_v1c.py, which downloads "
    "open-mmlab://resnet101_v1c), or switch pretraining off with "
    "--cfg-options model.backbone.init_cfg=None (training from scratch will not reach the "
    "paper's numbers)."
)


@WEIGHT_INITIALIZERS.register_module()
class HamResNetPretrained:
    """``init_cfg`` loading the release's ImageNet ResNet file into ``ResNetV1c(stem_channels=
    128)``, e.g. ``dict(type='HamResNetPretrained', checkpoint='data/pretrained/resnet101-2a57e44d
    .pth')``. Strict: a missing or wrong file raises, nothing half-loads."""

    def __init__(self, checkpoint: str) -> None:
        self.checkpoint = checkpoint
        self.wholemodule = False  # set by mmengine's initialize(); unused

    def __call__(self, module: nn.Module) -> None:
        """Load the mapped weights into ``module`` (the backbone)."""
        path = os.fspath(self.checkpoint)
        if not osp.isfile(path):
            raise FileNotFoundError(
                f"Pretrained backbone not found: {path} (ImageNet ResNet weights of the Hamburger "
                f"release, e.g. resnet101-2a57e44d.pth for ResNet-101). "
                + PRETRAINED_HELP.format(path=path)
            )
        source = unwrap_state_dict(load_torch_file(path))
        state = map_state_dict(
            source,
            module.state_dict(),
            IMAGENET_RESNET_RULES,
            drop=IMAGENET_RESNET_DROP,
            fill_num_batches_tracked=True,
        )
        module.load_state_dict(state, strict=True)
        print_log(f"loaded the release's ImageNet weights from {path}", logger="current")
        if hasattr(module, "_params_init_info"):
            update_init_info(module, init_info=f"{type(self).__name__}: load from {path}")
