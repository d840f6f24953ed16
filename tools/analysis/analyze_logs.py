"""mmseg's analyze_logs (curves from a run's json log; ``pip install 'hamseg[plots]'``); what
``mim run hamseg analyze_logs RUN/TIME/vis_data/TIME.json --keys loss mIoU --out c.png`` runs.

The same as ``python tools/mmseg_tool.py analyze_logs ...`` (every mmseg tool: ``mim run hamseg
mmseg_tool TOOL ...``).
"""

import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))  # a checkout

from tools.lib.mmseg_front_end import main  # noqa: E402

if __name__ == "__main__":
    main(["analyze_logs", *sys.argv[1:]])
