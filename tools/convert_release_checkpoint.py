"""Convert the authors' released HamNet checkpoint (Gsunshine/Enjoy-Hamburger, seg/HamNet) into an
mmseg checkpoint that configs/ham_voc.py loads strictly (docs/recipes.md)::

    python tools/convert_release_checkpoint.py RELEASE/final.pth data/pretrained/hamnet_voc.pth
    python tools/test.py configs/ham_voc.py data/pretrained/hamnet_voc.pth --tta

Names are mapped and checked 1:1 against the model of --config; a mismatch names every tensor
(exit 2). The renaming rules: hamseg/models/release_weights.py.
"""

import argparse
import os.path as osp

import hamseg  # noqa: F401  (registers hamseg and adapts the stack before mmseg is used)
from hamseg.cli import run_cli
from hamseg.models.release_weights import convert_release_checkpoint

HAM_VOC = osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), "configs", "ham_voc.py")


def main() -> None:
    p = argparse.ArgumentParser(description="Released HamNet checkpoint -> mmseg checkpoint")
    p.add_argument("src", help="the release's checkpoint ({'net': state_dict})")
    p.add_argument("dst", help="the mmseg checkpoint to write ({'state_dict', 'meta'})")
    p.add_argument("--config", default=HAM_VOC, help="the model it must fit")
    args = p.parse_args()
    count = convert_release_checkpoint(args.src, args.dst, args.config)
    print(f"converted {count} tensors -> {args.dst} (loads strictly into {args.config})")


if __name__ == "__main__":
    run_cli(main)
