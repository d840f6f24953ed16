"""The authors' release (Gsunshine/Enjoy-Hamburger, seg/HamNet) in mmseg's names: its ImageNet
ResNet (``init_cfg=dict(type='HamResNetPretrained', ...)``) and its HamNet checkpoint
(:func:`convert_release_checkpoint`), each mapping checked 1:1 and loaded strictly."""

from __future__ import annotations

import os.path as osp
from collections.abc import Mapping, Sequence

import torch
from mmengine.config import Config
from mmengine.logging import print_log
from mmengine.registry import init_default_scope
from mmengine.utils import mkdir_or_exist
from mmseg.registry import MODELS, WEIGHT_INITIALIZERS
from torch import Tensor, nn

from hamseg.compat.checkpoint import load_checkpoint_file
from hamseg.utils.errors import UsageError, require_file

#: (source prefix, target prefix): the ImageNet file -> mmseg ``ResNet(deep_stem=True)``.
IMAGENET_RESNET_RULES = [(f"conv1.{i}.", f"stem.{i}.") for i in (0, 1, 3, 4, 6)]
IMAGENET_RESNET_RULES += [("bn1.", "stem.7.")] + [(f"layer{i}.", f"layer{i}.") for i in range(1, 5)]
#: The HamNet checkpoint -> ``EncoderDecoder(ResNetV1c, HamHead)``; the release's backbone is
#: ``Sequential(conv1, bn1, relu, maxpool, layer1..4)``.
RELEASE_HAMNET_RULES = [("backbone.0.", "backbone.stem."), ("backbone.1.", "backbone.stem.7.")]
RELEASE_HAMNET_RULES += [(f"backbone.{i + 3}.", f"backbone.layer{i}.") for i in range(1, 5)]
RELEASE_HAMNET_RULES += [(f"{m}.", f"decode_head.{m}.") for m in ("squeeze", "hamburger", "align")]
RELEASE_HAMNET_RULES += [("fc.1.", "decode_head.conv_seg.")]


def unwrap_state_dict(obj: object, keys: Sequence[str] = ("net", "state_dict", "model")) -> dict:
    """The ``{name: tensor}`` dict in a loaded checkpoint (itself or under the first of ``keys``),
    without a DataParallel ``module.`` prefix; TypeError if there is none."""
    if isinstance(obj, Mapping):
        obj = next((obj[k] for k in keys if isinstance(obj.get(k), Mapping)), obj)
    if not isinstance(obj, Mapping) or not all(isinstance(v, Tensor) for v in obj.values()):
        raise TypeError(f"expected a state dict of tensors (or one under {list(keys)})")
    if obj and all(k.startswith("module.") for k in obj):
        return {k[len("module.") :]: v for k, v in obj.items()}
    return dict(obj)


def map_state_dict(
    source: Mapping[str, Tensor],
    target: Mapping[str, Tensor],
    rules: Sequence[tuple[str, str]],
    drop: Sequence[str] = (),
    fill_counters: bool = False,
) -> dict[str, Tensor]:
    """``source`` renamed into ``target``'s names by ``(source prefix, target prefix)`` rules
    (the longest prefix wins), ``drop``'s prefixes left out; missing BatchNorm counters filled
    with 0 if ``fill_counters``. UsageError unless the result is 1:1."""
    mapped = {}
    problems = {"unused": [], "unknown": [], "shape": []}
    for name, tensor in source.items():
        if any(name.startswith(p) for p in drop):
            continue
        # the longest matching prefix: of two prefixes of one name the longer sorts last
        src, dst = max(((s, d) for s, d in rules if name.startswith(s)), default=(None, None))
        new = None if src is None else dst + name[len(src) :]
        if new is None:
            problems["unused"].append(name)
        elif new not in target:
            problems["unknown"].append(f"{name} -> {new}")
        else:
            mapped[new] = tensor
        if new in target and tensor.shape != target[new].shape:
            problems["shape"].append(f"{name} {tuple(tensor.shape)} -> {tuple(target[new].shape)}")
    for k in target:
        if k not in mapped and fill_counters and k.endswith(".num_batches_tracked"):
            mapped[k] = torch.zeros_like(target[k])
    problems["missing"] = [k for k in target if k not in mapped]
    if any(problems.values()):
        listing = "; ".join(f"{k}: {', '.join(v)}" for k, v in problems.items() if v)
        raise UsageError(f"the state dict does not map 1:1 onto the model ({listing})")
    return {k: mapped[k] for k in target}


@WEIGHT_INITIALIZERS.register_module()
class HamResNetPretrained:
    """``init_cfg`` loading the release's ImageNet ResNet file into ``ResNetV1c(stem_channels=
    128)``; strict: a missing or wrong file raises, nothing half-loads."""

    def __init__(self, checkpoint: str) -> None:
        self.checkpoint = checkpoint
        self.wholemodule = False  # set by mmengine's initialize()

    def __call__(self, module: nn.Module) -> None:
        path = require_file(self.checkpoint, "pretrained backbone (docs/recipes.md)")
        source = unwrap_state_dict(load_checkpoint_file(path))
        target = module.state_dict()
        state = map_state_dict(source, target, IMAGENET_RESNET_RULES, ["fc."], fill_counters=True)
        module.load_state_dict(state, strict=True)
        print_log(f"loaded the release's ImageNet weights from {path}", logger="current")


def convert_release_checkpoint(src: str, dst: str, config: str) -> int:
    """Write the release's HamNet file ``src`` as an mmseg checkpoint ``dst`` that ``config``'s
    model loads strictly (``{'state_dict', 'meta'}``); returns the number of tensors."""
    release = load_checkpoint_file(require_file(src, "release checkpoint (final.pth)"))
    net = release.get("net") if isinstance(release, dict) else None
    if not isinstance(net, dict) or not all(isinstance(v, Tensor) for v in net.values()):
        raise UsageError(f"{src} is not the release's {{'net': state_dict}} format")
    cfg = Config.fromfile(config)
    init_default_scope(cfg.get("default_scope", "mmseg"))
    cfg.model.backbone.init_cfg = cfg.model.pretrained = None  # the weights come from src
    model = MODELS.build(cfg.model)
    state = map_state_dict(net, model.state_dict(), RELEASE_HAMNET_RULES)
    model.load_state_dict(state, strict=True)
    mkdir_or_exist(osp.dirname(osp.abspath(dst)))
    meta = dict(source=osp.basename(src), config=config)
    torch.save(dict(state_dict=state, meta=meta), dst)
    return len(state)
