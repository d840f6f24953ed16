"""Run one of mmseg's tool scripts, or any Python file, after ``import hamseg``.

    python tools/mmseg_tool.py TOOL [ARGS ...]    # ARGS: the script's own (TOOL --help)

TOOL: get_flops, benchmark, browse_dataset, confusion_matrix, analyze_logs, print_config,
publish_model (also at mmseg's places: tools/analysis_tools/TOOL.py, tools/misc/TOOL.py), any
other script by its path under mmseg's tools folder (misc/browse_dataset,
model_converters/swin2mmseg), or a Python file (mmseg's demo/image_demo.py, your own). It runs as
``python FILE ARGS`` would, with the fixes of hamseg.compat.mmseg_tools (docs/ecosystem.md).
"""

import sys

from hamseg.cli import run_cli
from hamseg.compat.mmseg_tools import run_mmseg_tool

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
    else:
        run_cli(lambda: run_mmseg_tool(sys.argv[1], sys.argv[2:]))
