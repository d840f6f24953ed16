"""Generate the Context Shapes demo dataset (seeded, deterministic) in mmseg's folder layout.

    python tools/dataset_converters/generate_context_shapes.py            # data/context_shapes
    python tools/dataset_converters/generate_context_shapes.py --size 96 --num-train 50 \\
        --num-val 10 --out-dir /tmp/cs --seed 1

docs/demo.md says what the images show and why only global context decides the labels.
"""

from __future__ import annotations

import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

import hamseg  # noqa: E402,F401  (adapts the stack; before anything imports mmseg)

# isort: split
from hamseg.datasets.context_shapes import PALETTE, ContextShapesConfig, generate_context_shapes  # noqa: E402
from tools.dataset_converters.generator_cli import generate_main  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    return generate_main(
        argv,
        __doc__,
        ContextShapesConfig,
        generate_context_shapes,
        PALETTE,
        "data/context_shapes",
        ("min_objects", "max_objects"),
    )


if __name__ == "__main__":
    sys.exit(main())
