"""mmseg's tool scripts on this stack (tools/mmseg_tool.py, tools/analysis_tools/, tools/misc/):
:func:`run_mmseg_tool` runs one after ``import hamseg`` (on mmcv-lite they fail at their first
line, ``import mmseg.apis``). While one of mmseg 1.2.2's runs, the bugs a user meets in it are
patched (tests/tools/test_mmseg_tool.py has a canary for each):

- analysis_tools/get_flops.py passes ``input_shape`` and ``inputs``, which mmengine 0.10.7
  refuses together ("cannot be both set"): ``inputs`` is used;
- analysis_tools/browse_dataset.py and misc/browse_dataset.py draw on a non-contiguous image,
  which OpenCV refuses: they get a contiguous copy;
- analysis_tools/benchmark.py averages over images 6-200 and prints nan for fewer: the loader
  repeats;
- analysis_tools/confusion_matrix.py and misc/browse_dataset.py read the class's ``METAINFO``
  (``KeyError: 'classes'`` for mmseg's ``BaseSegDataset`` whose classes the config sets): they
  get the dataset's own;
- misc/publish_model.py names its output ``out_file.rstrip('.pth') + '-<sha>.pth'``
  (``hamnet.pth`` -> ``hamne-<sha>.pth``): such a name is refused in one line.
"""

from __future__ import annotations

import contextlib
import os.path as osp
import runpy
import sys
from collections.abc import Iterator
from unittest import mock

import mmengine.analysis
import mmseg
import numpy as np
from mmengine.runner import Runner
from mmseg.registry import DATASETS
from mmseg.visualization import SegLocalVisualizer

from hamseg.utils.errors import UsageError

from .package_lookup import config_file

#: Short names of mmseg's scripts (relative to its tools folder); others run by that path.
TOOLS = {
    "get_flops": "analysis_tools/get_flops.py",
    "benchmark": "analysis_tools/benchmark.py",
    "browse_dataset": "analysis_tools/browse_dataset.py",
    "confusion_matrix": "analysis_tools/confusion_matrix.py",
    "analyze_logs": "analysis_tools/analyze_logs.py",
    "print_config": "misc/print_config.py",
    "publish_model": "misc/publish_model.py",
}
#: The mmseg version whose scripts the fixes are for.
FIXED_VERSION = "1.2.2"


def mmseg_tools_dir() -> str:
    """mmseg's tools folder: ``mmseg/.mim/tools`` when installed, else a checkout's tools/."""
    package = osp.dirname(osp.abspath(mmseg.__file__))
    installed = osp.join(package, ".mim", "tools")
    return installed if osp.isdir(installed) else osp.join(osp.dirname(package), "tools")


def _patches(script: str) -> list:
    """mock patches fixing ``script`` (a path relative to mmseg's tools folder)."""
    count = mmengine.analysis.get_model_complexity_info
    draw = SegLocalVisualizer.add_datasample
    build_loader, build_dataset = Runner.build_dataloader, DATASETS.build

    def flops(model, input_shape=None, inputs=None, **kwargs):
        return count(model, None if inputs is not None else input_shape, inputs, **kwargs)

    def contiguous(self, name, image, *args, **kwargs):
        return draw(self, name, np.ascontiguousarray(image), *args, **kwargs)

    def repeated(*args, **kwargs):
        loader = build_loader(*args, **kwargs)
        while len(loader):
            yield from loader

    def own_metainfo(*args, **kwargs):
        dataset = build_dataset(*args, **kwargs)
        dataset.METAINFO = dataset.metainfo  # hides the class attribute the scripts read
        return dataset

    drawing = (SegLocalVisualizer, "add_datasample", contiguous)
    metainfo = (DATASETS, "build", own_metainfo)
    fixes = {
        "analysis_tools/get_flops.py": [(mmengine.analysis, "get_model_complexity_info", flops)],
        "analysis_tools/browse_dataset.py": [drawing],
        "analysis_tools/benchmark.py": [(Runner, "build_dataloader", staticmethod(repeated))],
        "analysis_tools/confusion_matrix.py": [metainfo],
        "misc/browse_dataset.py": [metainfo, drawing],
    }
    return [mock.patch.object(*fix) for fix in fixes.get(script, [])]


@contextlib.contextmanager
def tool_fixes(script: str, argv: list[str]) -> Iterator[None]:
    """The fixes for mmseg 1.2.2's ``script`` (relative to its tools folder) in the block."""
    if mmseg.__version__ != FIXED_VERSION:
        yield
        return
    out = [arg for arg in argv if not arg.startswith("-")][1:2]
    if script == "misc/publish_model.py" and out and out[0][:-4] != out[0].rstrip(".pth"):
        raise UsageError(
            f"publish_model: OUT_FILE {out[0]!r} must end in '.pth' after a name that does not "
            "end in '.', 'p', 't' or 'h' (mmseg 1.2.2 strips those), e.g. model_pub.pth"
        )
    with contextlib.ExitStack() as stack:
        for patch in _patches(script):
            stack.enter_context(patch)
        yield


def run_mmseg_tool(name: str, argv: list[str]) -> None:
    """Run mmseg's script ``name`` (a :data:`TOOLS` name, a path under mmseg's tools folder,
    with or without '.py', or any Python file) as ``python SCRIPT ARGV`` would, with its fixes
    and packaged config names (``hamseg::DIR/NAME.py``) in ``argv`` given as their files.

    Raises:
        UsageError: No such script.
    """
    root = mmseg_tools_dir()
    path = osp.join(root, TOOLS.get(name, name if name.endswith(".py") else f"{name}.py"))
    path = osp.abspath(name if name.endswith(".py") and osp.isfile(name) else path)
    if not osp.isfile(path):
        raise UsageError(
            f"unknown mmseg tool {name!r}: one of {', '.join(TOOLS)}, a script under {root} "
            "(e.g. misc/browse_dataset) or a Python file"
        )
    argv = [config_file(a) if "::" in a and a.endswith(".py") else a for a in argv]  # hamseg::
    saved = sys.argv, list(sys.path)
    sys.argv, sys.path[:0] = [path, *argv], [osp.dirname(path)]
    try:
        with tool_fixes(osp.relpath(path, root).replace(osp.sep, "/"), argv):
            runpy.run_path(path, run_name="__main__")
    finally:
        sys.argv, sys.path[:] = saved
