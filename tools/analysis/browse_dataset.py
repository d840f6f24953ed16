"""mmseg's browse_dataset (the training pipeline's images and labels) on a hamseg config;
what ``mim run hamseg browse_dataset CONFIG --not-show --output-dir DIR`` runs.

The same as ``python tools/mmseg_tool.py browse_dataset ...`` (every mmseg tool: ``mim run hamseg
mmseg_tool TOOL ...``).
"""

import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))  # a checkout

from tools.lib.mmseg_front_end import main  # noqa: E402

if __name__ == "__main__":
    main(["browse_dataset", *sys.argv[1:]])
