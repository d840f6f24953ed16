"""mmseg's benchmark (inference speed) on a hamseg config and checkpoint; what
``mim run hamseg benchmark CONFIG CHECKPOINT`` runs.

The same as ``python tools/mmseg_tool.py benchmark ...`` (every mmseg tool: ``mim run hamseg
mmseg_tool TOOL ...``).
"""

import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))  # a checkout

from tools.lib.mmseg_front_end import main  # noqa: E402

if __name__ == "__main__":
    main(["benchmark", *sys.argv[1:]])
