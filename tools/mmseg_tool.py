"""Run one of mmseg 1.2.2's tool scripts on hamseg configs, with the stack made ready first.

Usage::

    python tools/mmseg_tool.py                      # the list of tools
    python tools/mmseg_tool.py get_flops configs/demo/hamhead-cd_r18-d8_context-shapes.py --shape 64
    python tools/mmseg_tool.py benchmark CONFIG CHECKPOINT
    python tools/mmseg_tool.py browse_dataset CONFIG --not-show --output-dir work_dirs/browse
    python tools/mmseg_tool.py confusion_matrix CONFIG PRED_DIR OUT_DIR   # PRED_DIR: test.py --out
    python tools/mmseg_tool.py print_config CONFIG
    python tools/mmseg_tool.py publish_model CHECKPOINT OUT.pth
    python tools/mmseg_tool.py analyze_logs RUN/TIME/vis_data/TIME.json --keys loss mIoU --out c.png

Everything after the tool name is the mmseg script's own command line. The logic (and the fixes for
the scripts' own bugs) lives in tools/lib/mmseg_front_end.py and tools/lib/mmseg_tool_fixes.py
(``mim run hamseg mmseg_tool ...`` does the same with the wheel, without a checkout).
"""

import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

from tools.lib.mmseg_front_end import main  # noqa: E402  (imports hamseg: the stack is ready)

if __name__ == "__main__":
    main()
