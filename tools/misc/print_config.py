"""mmseg's print_config on a hamseg config (an existing example.py is kept); what
``mim run hamseg print_config CONFIG`` runs.

The same as ``python tools/mmseg_tool.py print_config ...`` (every mmseg tool: ``mim run hamseg
mmseg_tool TOOL ...``).
"""

import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))  # a checkout

from tools.lib.mmseg_front_end import main  # noqa: E402

if __name__ == "__main__":
    main(["print_config", *sys.argv[1:]])
