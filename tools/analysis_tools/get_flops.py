"""mmseg 1.2.2's tools/analysis_tools/get_flops.py on hamseg configs, same arguments."""

import sys

from hamseg.cli import run_cli
from hamseg.compat.mmseg_tools import run_mmseg_tool

if __name__ == "__main__":
    run_cli(lambda: run_mmseg_tool("analysis_tools/get_flops.py", sys.argv[1:]))
