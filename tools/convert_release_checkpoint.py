"""Convert the authors' released HamNet checkpoint to an mmseg checkpoint for configs/ham_voc.py.

Usage::

    python tools/convert_release_checkpoint.py RELEASE.pth data/pretrained/hamnet_voc_release.pth
    python tools/test.py configs/ham_voc.py data/pretrained/hamnet_voc_release.pth --tta

The release (Gsunshine/Enjoy-Hamburger, seg/HamNet; VOC test 85.94 mIoU, Hamburger V2, r = 64)
saves ``{'net': state_dict, 'step': ..., 'best_mIoU': ...}``. The names are mapped with
:data:`hamseg.models.release_weights.RELEASE_HAMNET_RULES` (``backbone.0`` -> ``backbone.stem``,
``backbone.4..7`` -> ``backbone.layer1..4``, ``fc.1`` -> ``decode_head.conv_seg``, head modules
under ``decode_head.``). The result is checked against the model of ``--config``: every source
tensor is used exactly once, every model tensor is filled, every shape agrees, and the model
loads it with ``strict=True``; any mismatch is an error that lists the names.
The file is read with ``torch.load(..., weights_only=True)``: no pickled code runs.
"""

from __future__ import annotations

import argparse
import os
import os.path as osp
import sys
from collections.abc import Sequence
from typing import Optional

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
import torch  # noqa: E402
from mmengine.config import Config  # noqa: E402
from mmengine.registry import init_default_scope  # noqa: E402
from mmseg.registry import MODELS  # noqa: E402
from torch import Tensor, nn  # noqa: E402

from hamseg.models.release_weights import (  # noqa: E402
    RELEASE_HAMNET_RULES,
    WeightMappingError,
    load_torch_file,
    map_state_dict,
)

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
DEFAULT_CONFIG = osp.join(REPO, "configs", "ham_voc.py")


def build_target_model(config: str) -> nn.Module:
    """The segmentor of ``config`` with its pretrained-weight init switched off (not called)."""
    cfg = Config.fromfile(config)
    init_default_scope(cfg.get("default_scope", "mmseg"))
    cfg.model.backbone.init_cfg = None
    cfg.model.pretrained = None
    return MODELS.build(cfg.model)


def release_state_dict(obj: object) -> dict[str, Tensor]:
    """The ``'net'`` state dict of a loaded release checkpoint.

    Raises:
        WeightMappingError: If ``obj`` is not a dict with a ``'net'`` state dict of tensors.
    """
    if not isinstance(obj, dict) or not isinstance(obj.get("net"), dict):
        keys = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
        raise WeightMappingError(
            f"expected the release's checkpoint format {{'net': state_dict, ...}}, got {keys}"
        )
    state = obj["net"]
    bad = [k for k, v in state.items() if not isinstance(v, Tensor)]
    if bad:
        raise WeightMappingError(f"'net' holds non-tensor entries: {bad}")
    return dict(state)


def convert(source: dict[str, Tensor], model: nn.Module) -> dict[str, Tensor]:
    """Map the release's names onto ``model`` and load the result with ``strict=True``.

    Returns:
        The converted state dict (the tensors of ``source``, renamed).
    """
    state = map_state_dict(source, model.state_dict(), RELEASE_HAMNET_RULES)
    model.load_state_dict(state, strict=True)
    return state


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Released HamNet checkpoint -> mmseg checkpoint")
    parser.add_argument("src", help="the release's checkpoint ({'net': state_dict})")
    parser.add_argument("dst", help="output mmseg checkpoint ({'state_dict': ..., 'meta': ...})")
    parser.add_argument(
        "--config", default=DEFAULT_CONFIG, help="config whose model must load the result"
    )
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if not osp.isfile(args.src):
        raise FileNotFoundError(
            f"release checkpoint not found: {args.src} (the V2 NMF r=64 model of "
            "Gsunshine/Enjoy-Hamburger, seg/README.md, 'Checkpoints')"
        )
    source = release_state_dict(load_torch_file(args.src))
    state = convert(source, build_target_model(args.config))
    os.makedirs(osp.dirname(osp.abspath(args.dst)), exist_ok=True)
    meta = dict(
        source=osp.basename(args.src),
        converted_by="tools/convert_release_checkpoint.py",
        config=osp.relpath(args.config, REPO) if args.config.startswith(REPO) else args.config,
    )
    torch.save(dict(state_dict=state, meta=meta), args.dst)
    print(f"converted {len(source)} tensors -> {args.dst} (loads strictly into {args.config})")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (WeightMappingError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
