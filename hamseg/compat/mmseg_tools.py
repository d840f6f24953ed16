"""mmseg's tool scripts after ``import hamseg`` (on mmcv-lite they fail at ``import mmseg.apis``),
the bugs a user meets in mmseg 1.2.2's patched while one runs (docs/ecosystem.md lists them)."""

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

FIXED_VERSION = "1.2.2"  #: the mmseg version whose scripts the fixes are for
FOLDERS = ("analysis_tools", "misc")  #: where a short name (``get_flops``) is looked up
TOOLS_DIR = osp.join(osp.dirname(mmseg.__file__), ".mim", "tools")  #: mmseg's scripts
if not osp.isdir(TOOLS_DIR):  # an editable install of mmseg's checkout: its tools/
    TOOLS_DIR = osp.join(osp.dirname(osp.dirname(mmseg.__file__)), "tools")


@contextlib.contextmanager
def tool_fixes(script: str, argv: list[str]) -> Iterator[None]:
    """The fixes for mmseg 1.2.2's ``script`` (relative to its tools folder) in the block."""
    out = [arg for arg in argv if not arg.startswith("-")][1:2]
    if mmseg.__version__ != FIXED_VERSION:
        yield
        return
    if script == "misc/publish_model.py" and out and out[0][:-4] != out[0].rstrip(".pth"):
        raise UsageError(  # mmseg names it out_file.rstrip('.pth') + '-<sha>.pth'
            f"publish_model: OUT_FILE {out[0]!r} must end in '.pth' after a name that does not "
            "end in '.', 'p', 't' or 'h' (mmseg 1.2.2 strips those), e.g. model_pub.pth"
        )
    count, draw = mmengine.analysis.get_model_complexity_info, SegLocalVisualizer.add_datasample
    build_loader, build_dataset = Runner.build_dataloader, DATASETS.build

    def flops(model, input_shape=None, inputs=None, **kwargs):  # "cannot be both set"
        return count(model, None if inputs is not None else input_shape, inputs, **kwargs)

    def contiguous(self, name, image, *args, **kwargs):  # OpenCV refuses to draw on a view
        return draw(self, name, np.ascontiguousarray(image), *args, **kwargs)

    def repeated(*args, **kwargs):  # benchmark.py averages images 6-200: nan for fewer
        loader = build_loader(*args, **kwargs)
        while len(loader):
            yield from loader

    def own_metainfo(*args, **kwargs):  # KeyError 'classes' for classes the config sets
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
    with contextlib.ExitStack() as stack:
        for fix in fixes.get(script, []):
            stack.enter_context(mock.patch.object(*fix))
        yield


def run_mmseg_tool(name: str, argv: list[str]) -> None:
    """Run mmseg's script ``name`` (``get_flops``, ``misc/browse_dataset``, with or without
    '.py') or a Python file as ``python SCRIPT ARGV`` would, with its fixes; packaged config
    names (``hamseg::DIR/NAME.py``) in ``argv`` become their files."""
    script = name if name.endswith(".py") else f"{name}.py"
    found = [osp.abspath(name)] * (name == script)  # a Python file, else mmseg's script
    found += [osp.join(TOOLS_DIR, folder, script) for folder in ("", *FOLDERS)]
    path = next((p for p in found if osp.isfile(p)), None)
    if path is None:
        raise UsageError(
            f"unknown mmseg tool {name!r}: a script under {TOOLS_DIR}/{{{','.join(FOLDERS)}}} "
            "(get_flops, misc/browse_dataset) or a Python file"
        )
    argv = [config_file(a) if "::" in a and a.endswith(".py") else a for a in argv]
    saved = sys.argv, list(sys.path)
    sys.argv, sys.path[:0] = [path, *argv], [osp.dirname(path)]
    try:
        with tool_fixes(osp.relpath(path, TOOLS_DIR).replace(osp.sep, "/"), argv):
            runpy.run_path(path, run_name="__main__")
    finally:
        sys.argv, sys.path[:] = saved
