"""Convert the authors' released HamNet checkpoint to an mmseg checkpoint for configs/ham_voc.py.

    python tools/convert_release_checkpoint.py RELEASE.pth data/pretrained/hamnet_voc_release.pth
    python tools/test.py configs/ham_voc.py data/pretrained/hamnet_voc_release.pth --tta

The names are mapped and checked 1:1 against the model of --config, which loads the result
strictly; a mismatch lists the names (exit 1). docs/recipes.md.
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, REPO)  # run from a checkout

import hamseg  # noqa: E402,F401  (adapts the stack and registers hamseg before mmseg is used)

# isort: split
from hamseg.models.release_weights import WeightMappingError  # noqa: E402
from tools.model_converters.release_checkpoint import convert_release_checkpoint  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description="Released HamNet checkpoint -> mmseg checkpoint")
    p.add_argument("src", help="the release's checkpoint ({'net': state_dict})")
    p.add_argument("dst", help="output mmseg checkpoint ({'state_dict': ..., 'meta': ...})")
    p.add_argument("--config", default=osp.join(REPO, "configs", "ham_voc.py"))
    args = p.parse_args()
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
