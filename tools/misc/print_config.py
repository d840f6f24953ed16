"""mmseg 1.2.2's tools/misc/print_config.py on hamseg configs, same arguments."""

import sys

from hamseg.cli import run_cli
from hamseg.compat.mmseg_tools import run_mmseg_tool

if __name__ == "__main__":
    run_cli(lambda: run_mmseg_tool("misc/print_config.py", sys.argv[1:]))
