"""mmseg's confusion_matrix of a test run's predictions (``tools/test.py --out PRED_DIR``);
what ``mim run hamseg confusion_matrix CONFIG PRED_DIR OUT_DIR`` runs.

The same as ``python tools/mmseg_tool.py confusion_matrix ...`` (every mmseg tool: ``mim run hamseg
mmseg_tool TOOL ...``).
"""

import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))  # a checkout

from tools.lib.mmseg_front_end import main  # noqa: E402

if __name__ == "__main__":
    main(["confusion_matrix", *sys.argv[1:]])
