"""mmseg's publish_model (drops the optimiser state, puts the sha256 into the name); what
``mim run hamseg publish_model CHECKPOINT OUT.pth`` runs.

The same as ``python tools/mmseg_tool.py publish_model ...`` (every mmseg tool: ``mim run hamseg
mmseg_tool TOOL ...``).
"""

import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))  # a checkout

from tools.lib.mmseg_front_end import main  # noqa: E402

if __name__ == "__main__":
    main(["publish_model", *sys.argv[1:]])
