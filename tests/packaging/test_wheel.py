"""The sdist and the wheel (built offline as ``python -m build`` would) carry the library, the
configs, the model index and the scripts, not the lab's code; installed alone, away from the
repository, the wheel serves ``hamseg::`` configs."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

import hamseg
from tests.conftest import REPO

CONFIG = "demo/hamhead-nmf_r18-d8_context-shapes.py"
SUFFIXES = (".py", ".yaml", ".yml", ".md")

ONLY_THE_INSTALLED_COPY = """
import os
import sys
# the test venv's editable install puts the checkout on sys.path (setup.py's package_dir)
sys.path = [p for p in sys.path if os.path.realpath(p or '.') != {repo!r}]
import hamseg
assert hamseg.__file__.startswith({target!r}), hamseg.__file__
from mmengine.config import Config
from mmengine.hub import get_config, get_model
print(Config.fromfile("hamseg::{config}").filename)
print(get_config("hamseg::{config}", pretrained=True).model_path)
print(type(get_model("hamseg::{config}").decode_head).__name__)
"""


def run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(args, capture_output=True, text=True, timeout=900, **kwargs)
    assert result.returncode == 0, (args, result.stdout[-2000:], result.stderr[-3000:])
    return result


def repo_files(folder: str, suffixes: tuple[str, ...]) -> set[str]:
    """The checkout's ``folder/**/*SUFFIX`` files (not the links of ``hamseg/.mim``)."""
    found = glob.glob(f"{folder}/**/*", root_dir=REPO, recursive=True)
    return {f for f in found if f.endswith(suffixes) and "__pycache__" not in f}


def build(tmp_path) -> tuple:
    """``(sdist, wheel)`` built from a copy of the checkout, under ``tmp_path``."""
    src, dist = tmp_path / "src", tmp_path / "dist"
    skip = ("*.egg-info", "__pycache__", "build", "dist", "work_dirs", "data", ".git", ".venv")
    shutil.copytree(REPO, src, symlinks=True, ignore=shutil.ignore_patterns(*skip))
    hook = (  # the PEP 517 hook pip uses for a setup.py project (no [build-system])
        "import sys; from setuptools.build_meta import __legacy__ as b;"
        "print(b.build_sdist(sys.argv[1]))"
    )
    sdist = dist / run([sys.executable, "-c", hook, str(dist)], cwd=src).stdout.split()[-1]
    flags = ["--no-deps", "--no-build-isolation", "--no-cache-dir", "-w", str(dist)]
    run([sys.executable, "-m", "pip", "wheel", *flags, str(sdist)])
    (wheel,) = dist.glob("hamseg-*.whl")
    return sdist, wheel


@pytest.mark.slow
def test_the_wheel_carries_the_library_configs_and_scripts_and_serves_them_alone(tmp_path):
    target, cwd = tmp_path / "target", tmp_path / "run"
    sdist, wheel = build(tmp_path)
    pip = [sys.executable, "-m", "pip"]
    run([*pip, "install", "--no-deps", "--no-compile", "--target", str(target), str(wheel)])
    with tarfile.open(sdist) as tar:  # the sdist: the sources of truth, no projects/
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    assert repo_files("configs", SUFFIXES) | {"LICENSE", "model-index.yml", "setup.py"} <= members
    assert not any(m.startswith(("hamseg/.mim", "projects/")) for m in members)
    with zipfile.ZipFile(wheel) as whl:
        listed = set(whl.namelist())
        metadata = whl.read(f"hamseg-{hamseg.__version__}.dist-info/METADATA").decode()
    for field in ("Home-page: https://", "Project-URL: Paper, https://", "Classifier: Topic"):
        assert field in metadata, field
    packaged = {"hamseg/.mim/" + c for c in repo_files("configs", SUFFIXES)} | {
        "hamseg/.mim/model-index.yml"
    }
    scripts = ("train.py", "infer.py", "run_demo.py", "analysis_tools/get_flops.py")
    assert packaged | {f"hamseg/.mim/tools/{s}" for s in scripts} <= listed
    assert not any(n.startswith(("hamseg/.mim/tools/lab/", "projects/")) for n in listed)
    library = {n.split("/")[0] for n in listed if not n.startswith("hamseg-")}
    assert library == {"hamseg"}, library  # no top-level tools or projects package
    modules = {n for n in listed if n.endswith(".py") and not n.startswith("hamseg/.mim/")}
    assert modules == repo_files("hamseg", (".py",)), modules ^ repo_files("hamseg", (".py",))
    assert f"hamseg-{hamseg.__version__}.dist-info/licenses/LICENSE" in listed
    mim = target / "hamseg" / ".mim" / "configs"
    assert mim.is_dir() and not mim.is_symlink()

    # from a folder outside the repository, with only the installed copy on the path
    cwd.mkdir()
    env = dict(os.environ, PYTHONPATH=str(target), OMP_NUM_THREADS="1")
    code = ONLY_THE_INSTALLED_COPY.format(target=str(target), repo=REPO, config=CONFIG)
    lines = run([sys.executable, "-c", code], cwd=cwd, env=env).stdout.splitlines()
    assert lines[-3] == str(mim / CONFIG) and lines[-1] == "HamHead"
    assert lines[-2] == "work_dirs/demo/hamhead-nmf_r18-d8_context-shapes/iter_500.pth"
