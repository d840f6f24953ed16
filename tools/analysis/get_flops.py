"""mmseg's get_flops on hamseg configs; what ``mim run hamseg get_flops CONFIG --shape 64`` runs.

The same as ``python tools/mmseg_tool.py get_flops ...`` (every mmseg tool: ``mim run hamseg
mmseg_tool TOOL ...``).
"""

import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))  # a checkout

from tools.lib.mmseg_front_end import main  # noqa: E402

if __name__ == "__main__":
    main(["get_flops", *sys.argv[1:]])
