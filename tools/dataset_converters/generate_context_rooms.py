"""Generate the Context Rooms demo task (seeded, deterministic) in mmseg's folder layout.

    python tools/dataset_converters/generate_context_rooms.py            # data/context_rooms
    python tools/dataset_converters/generate_context_rooms.py --num-train 50 --num-val 10 \\
        --out-dir /tmp/rooms --seed 1 --preview /tmp/rooms.png

docs/demo.md says what the images show and why one global fact cannot decide the labels. A lab
task: its code is tools/lab/analysis/context_rooms.py.
"""

from __future__ import annotations

import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack; before anything imports mmseg)

# isort: split
from tools.dataset_converters.generator_cli import generate_main  # noqa: E402
from tools.lab.analysis.context_rooms import (  # noqa: E402
    PALETTE,
    ContextRoomsConfig,
    generate_context_rooms,
)


def main(argv: list[str] | None = None) -> int:
    return generate_main(
        argv, __doc__, ContextRoomsConfig, generate_context_rooms, PALETTE, "data/context_rooms", ()
    )


if __name__ == "__main__":
    sys.exit(main())
