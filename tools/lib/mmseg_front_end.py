"""Run mmseg 1.2.2's tool scripts, or any Python file, on the adapted stack with hamseg imported:
``python tools/mmseg_tool.py TOOL ARGS`` (mmseg's scripts import ``mmseg.apis`` first thing,
which fails on mmcv-lite). It also refuses inputs the scripts would mishandle, resolves packaged
config names and applies :mod:`.mmseg_tool_fixes`. README. A checkout's code, behind
tools/mmseg_tool.py and the scripts of tools/analysis/ and tools/misc/ (which ``mim run hamseg
TOOL`` runs), not part of the hamseg library.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import os.path as osp
import runpy
import sys
from typing import Optional

import mmseg

import hamseg  # noqa: F401  (adapts the stack before mmseg's scripts import mmseg)
from hamseg.apis import init_model
from hamseg.apis.checkpoint import check_checkpoint_file
from hamseg.cli import CLIError, run_cli
from hamseg.compat.checkpoint import load_checkpoint_file
from hamseg.compat.package_lookup import config_file
from hamseg.utils.errors import require_file

from .mmseg_tool_fixes import tool_fixes

__all__ = ["TOOLS", "check_inputs", "main", "mmseg_tools_dir", "resolve_tool", "run_tool"]

#: Short names of mmseg 1.2.2's tool scripts (paths relative to mmseg's tools folder). Any other
#: script there runs by its relative path, e.g. ``model_converters/swin2mmseg``.
TOOLS: dict[str, str] = {
    "get_flops": "analysis_tools/get_flops.py",
    "benchmark": "analysis_tools/benchmark.py",
    "browse_dataset": "analysis_tools/browse_dataset.py",
    "confusion_matrix": "analysis_tools/confusion_matrix.py",
    "analyze_logs": "analysis_tools/analyze_logs.py",
    "print_config": "misc/print_config.py",
    "publish_model": "misc/publish_model.py",
}

#: Scripts whose first positional argument is a config file.
_CONFIG_FIRST = {
    "analysis_tools/get_flops.py",
    "analysis_tools/benchmark.py",
    "analysis_tools/browse_dataset.py",
    "analysis_tools/confusion_matrix.py",
    "misc/browse_dataset.py",
    "misc/print_config.py",
}


def mmseg_tools_dir() -> str:
    """mmseg's tools folder: ``mmseg/.mim/tools`` when installed, ``tools/`` in a checkout."""
    package = osp.dirname(osp.abspath(mmseg.__file__))
    for folder in (osp.join(package, ".mim", "tools"), osp.join(osp.dirname(package), "tools")):
        if osp.isdir(folder):
            return folder
    raise CLIError(f"mmseg's tools are not installed next to {package} (no .mim/tools)")


#: mmseg 1.2.2's scripts that fail on every 1.x config, with the way that works.
_BROKEN = {
    "deployment/pytorch2torchscript.py": "mmseg 1.2.2's deployment/pytorch2torchscript.py is left "
    "from mmseg 0.x and fails on every 1.x config (AssertionError: test_cfg specified in both "
    "outer field and model field); export with python tools/deploy/export_onnx.py CONFIG "
    "CHECKPOINT --out model.onnx",
}


def resolve_tool(name: str) -> tuple[str, str]:
    """Path of the script for a short name, a path under mmseg's tools folder, or any Python file
    (mmseg's demo/*.py, a user's script).

    Returns:
        (absolute path, path relative to the tools folder with '/' separators, or the absolute
        path for a script outside it).
    """
    root = mmseg_tools_dir()
    if name.endswith(".py") and osp.isfile(name):
        path = osp.abspath(name)
    else:
        rel = TOOLS.get(name) or (name if name.endswith(".py") else name + ".py")
        path = osp.normpath(osp.join(root, rel))
        if not path.startswith(root + os.sep) or not osp.isfile(path):
            raise CLIError(
                f"unknown mmseg tool {name!r}: use one of {', '.join(TOOLS)}, a script path under "
                f"{root} (e.g. analysis_tools/visualization_cam) or a Python file"
            )
    rel = osp.relpath(path, root).replace(os.sep, "/") if path.startswith(root + os.sep) else path
    if rel in _BROKEN:
        raise CLIError(_BROKEN[rel])
    return path, rel


def _check_publish_name(out_file: str) -> None:
    # publish_model.py names its result out_file.rstrip('.pth') + '-<sha>.pth': rstrip removes
    # any trailing '.', 'p', 't', 'h', so 'hamnet.pth' would become 'hamne-<sha>.pth'.
    stem = out_file[:-4] if out_file.endswith(".pth") else None
    if stem is None or not stem or stem != out_file.rstrip(".pth"):
        good = (stem or osp.splitext(out_file)[0] or "model") + "_pub.pth"
        raise CLIError(
            f"publish_model: OUT_FILE {out_file!r} must end in '.pth' and its name must not end "
            f"in '.', 'p', 't' or 'h' (mmseg 1.2.2 strips those characters); e.g. {good}"
        )


def _check_plot_packages() -> None:
    missing = [m for m in ("seaborn", "pandas") if importlib.util.find_spec(m) is None]
    if missing:
        raise CLIError(
            f"analyze_logs needs {' and '.join(missing)}: pip install 'hamseg[plots]' "
            "(or pip install seaborn pandas)"
        )


def _check_fits(config: str, checkpoint: str) -> None:
    """The checkpoint fits the config's model exactly (as ``tools/test.py`` checks)."""
    check_checkpoint_file(init_model(config, device="cpu"), checkpoint)


def check_inputs(script: str, argv: list[str]) -> list[str]:
    """Refuse, with one line, inputs that mmseg's script would mishandle: a missing config or
    checkpoint (benchmark.py would time an untrained model), a benchmark checkpoint that does not
    fit the config (mmseg loads it non-strictly), a publish_model name that mmseg 1.2.2 would
    mangle or a checkpoint that is not weights only, analyze_logs without seaborn/pandas.

    Args:
        script: Path relative to mmseg's tools folder (:func:`resolve_tool`'s second value).
        argv: The script's command line.

    Returns:
        ``argv`` with a packaged config name (``hamseg::demo/x.py``) replaced by its file.
    """
    args = list(itertools.takewhile(lambda arg: not arg.startswith("-"), argv))  # positionals
    argv = list(argv)
    if script in _CONFIG_FIRST and args:
        argv[0] = config_file(args[0])
    if script == "analysis_tools/benchmark.py" and len(args) > 1:
        _check_fits(argv[0], require_file(args[1], "checkpoint"))
    if script == "misc/publish_model.py" and args:
        if len(args) > 1:
            _check_publish_name(args[1])
        # publish_model.py's bare torch.load would fail with torch's long UnpicklingError on a
        # checkpoint that is not weights only; hamseg's loader refuses it in one line instead.
        load_checkpoint_file(require_file(args[0], "checkpoint"))
    if script == "analysis_tools/analyze_logs.py":
        _check_plot_packages()
    return argv


def run_tool(name: str, argv: list[str]) -> None:
    """Run mmseg's tool ``name`` with the command line ``argv``, on the adapted stack."""
    path, script = resolve_tool(name)
    argv = check_inputs(script, argv)
    saved = sys.argv, list(sys.path)
    sys.argv = [path, *argv]
    sys.path[:0] = [osp.dirname(path)]  # as `python path` would
    try:
        with tool_fixes(script) as script_globals:
            runpy.run_path(path, init_globals=script_globals, run_name="__main__")
    finally:
        sys.argv, sys.path[:] = saved


def usage() -> str:
    """The front end's help text: the short names and what they run."""
    lines = [
        "usage: python tools/mmseg_tool.py TOOL [ARGS ...]   (ARGS: the mmseg script's own;"
        " TOOL --help shows them)",
        "",
        "mmseg 1.2.2's tool scripts on hamseg configs and checkpoints:",
    ]
    lines += [f"  {name:<17} {rel}" for name, rel in TOOLS.items()]
    lines.append("  or any script under mmseg's tools folder by its path (model_converters/...)")
    lines.append("  or any Python file (mmseg's demo/image_demo.py, your own script)")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> None:
    """Command-line entry: ``TOOL [ARGS ...]``; no TOOL or ``-h`` prints the tool list."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return
    run_cli(lambda: run_tool(argv[0], argv[1:]))
