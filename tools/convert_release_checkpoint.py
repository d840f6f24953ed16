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
import os.path as osp
import sys
from collections.abc import Sequence
from typing import Optional

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from hamseg.apis.release_checkpoint import convert_release_checkpoint  # noqa: E402
from hamseg.models.release_weights import WeightMappingError  # noqa: E402

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
DEFAULT_CONFIG = osp.join(REPO, "configs", "ham_voc.py")


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
    name = osp.relpath(args.config, REPO) if args.config.startswith(REPO) else args.config
    count = convert_release_checkpoint(args.src, args.dst, args.config, name)
    print(f"converted {count} tensors -> {args.dst} (loads strictly into {args.config})")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (WeightMappingError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
