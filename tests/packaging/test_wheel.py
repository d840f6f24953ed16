"""A built hamseg, installed without the repository, serves its configs: ``hamseg::`` works.

Offline, as ``python -m build`` would: the sdist from setuptools' PEP 517 hook, then the wheel
from that sdist with ``pip wheel --no-build-isolation``, installed with ``pip install --target``
into a fresh folder that is then the only hamseg on the path.
"""

from __future__ import annotations

import os
import os.path as osp
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest
import torch

import hamseg
from tests.conftest import REPO

CONFIG = "demo/hamhead-nmf_r18-d8_context-shapes.py"
SUFFIXES = (".py", ".yaml", ".yml", ".md")

ONLY_THE_INSTALLED_COPY = """
import os
import sys
import hamseg
assert hamseg.__file__.startswith({target!r}), hamseg.__file__
assert {repo!r} not in {{os.path.realpath(p or '.') for p in sys.path}}, sys.path
from mmengine.config import Config
from mmengine.hub import get_config
print(Config.fromfile("hamseg::{config}").filename)
print(get_config("hamseg::{config}", pretrained=True).model_path)
"""

#: A config inheriting ``base`` with 3 classes, built with seed 0 and run on a seeded input.
FORWARD = """
import torch
import hamseg
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmseg.registry import MODELS

with open({mine!r}, "w") as f:
    f.write("_base_ = {base!r}\\nmodel = dict(decode_head=dict(num_classes=3))\\n")
init_default_scope("mmseg")
torch.manual_seed(0)
model = MODELS.build(Config.fromfile({mine!r}).model).eval()
torch.manual_seed(1)
with torch.no_grad():
    torch.save(model(torch.rand(1, 3, 33, 41), mode="tensor"), {out!r})
"""


def run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(args, capture_output=True, text=True, timeout=900, **kwargs)
    assert result.returncode == 0, (args, result.stdout[-2000:], result.stderr[-3000:])
    return result


def repo_configs() -> set[str]:
    out = set()
    for root, dirs, files in os.walk(osp.join(REPO, "configs")):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = osp.relpath(root, REPO).replace(osp.sep, "/")
        out |= {f"{rel}/{f}" for f in files if f.endswith(SUFFIXES)}
    return out


def package_modules() -> set[str]:
    """The checkout's ``hamseg/**/*.py`` (not the configs and tools of ``hamseg/.mim``)."""
    out = set()
    for root, dirs, files in os.walk(osp.join(REPO, "hamseg")):
        dirs[:] = [d for d in dirs if d not in ("__pycache__", ".mim")]
        rel = osp.relpath(root, REPO).replace(osp.sep, "/")
        out |= {f"{rel}/{f}" for f in files if f.endswith(".py")}
    return out


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
def test_built_wheel_serves_hamseg_configs_without_the_repository(tmp_path):
    target, cwd = tmp_path / "target", tmp_path / "run"
    sdist, wheel = build(tmp_path)
    pip = [sys.executable, "-m", "pip"]
    run([*pip, "install", "--no-deps", "--no-compile", "--target", str(target), str(wheel)])

    # the sdist carries the source of truth, the wheel the copies in hamseg/.mim
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    assert repo_configs() | {"LICENSE", "model-index.yml", "setup.py"} <= members
    assert not any(m.startswith("hamseg/.mim") for m in members)
    with zipfile.ZipFile(wheel) as whl:
        listed = set(whl.namelist())
        metadata = whl.read(f"hamseg-{hamseg.__version__}.dist-info/METADATA").decode()
    for field in ("Home-page: https://", "Project-URL: Paper, https://", "Classifier: Topic"):
        assert field in metadata, field
    packaged = {"hamseg/.mim/" + c for c in repo_configs()} | {"hamseg/.mim/model-index.yml"}
    packaged |= {"hamseg/.mim/tools/train.py", "hamseg/.mim/tools/analysis/get_flops.py"}
    assert packaged <= listed
    # the library only, as in the checkout: a checkout's lab code (tools/lab/) is no importable
    # package of the wheel, neither at the top level nor inside hamseg
    library = {n.split("/")[0] for n in listed if not n.startswith("hamseg-")}
    assert library == {"hamseg"}, library
    modules = {n for n in listed if n.endswith(".py") and not n.startswith("hamseg/.mim/")}
    assert modules == package_modules(), modules ^ package_modules()
    assert f"hamseg-{hamseg.__version__}.dist-info/licenses/LICENSE" in listed
    mim = target / "hamseg" / ".mim" / "configs"
    assert mim.is_dir() and not mim.is_symlink()

    # from a folder outside the repository, with only the installed copy on the path
    cwd.mkdir()
    env = dict(os.environ, PYTHONPATH=str(target), OMP_NUM_THREADS="1")
    code = ONLY_THE_INSTALLED_COPY.format(target=str(target), repo=REPO, config=CONFIG)
    installed = FORWARD.format(mine="mine.py", base=f"hamseg::{CONFIG}", out="out.pt")
    lines = run([sys.executable, "-c", code + installed], cwd=cwd, env=env).stdout.splitlines()
    assert lines[-2] == str(mim / CONFIG)
    assert lines[-1] == "work_dirs/demo/hamhead-nmf_r18-d8_context-shapes/iter_500.pth"

    # the same forward from the checkout's config, here
    mine, reference = str(tmp_path / "checkout.py"), str(tmp_path / "reference.pt")
    exec(FORWARD.format(mine=mine, base=osp.join(REPO, "configs", CONFIG), out=reference), {})
    got, expected = (torch.load(p, weights_only=True) for p in (cwd / "out.pt", reference))
    assert got.shape == (1, 3, 5, 6) and torch.allclose(got, expected, atol=1e-6)
