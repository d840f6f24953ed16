"""setup.py: one version, install_requires complete for ``import hamseg``, mmcv as extras."""

from __future__ import annotations

import glob
import importlib.metadata
import json
import os.path as osp
import re
import runpy
import subprocess
import sys

import pytest
import setuptools
from packaging.requirements import Requirement

import hamseg
from tests.conftest import REPO


@pytest.fixture(scope="module")
def setup_kwargs() -> dict:
    """The arguments setup.py passes to setuptools.setup (read without building anything)."""
    captured = {}
    real = setuptools.setup
    setuptools.setup = lambda **kwargs: captured.update(kwargs)
    try:
        runpy.run_path(osp.join(REPO, "setup.py"), run_name="__main__")
    finally:
        setuptools.setup = real
    return captured


def canonical(name: str) -> str:
    """PEP 503 name: 'typing_extensions' and 'Typing-Extensions' are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def names(requirements) -> set[str]:
    return {canonical(Requirement(r).name) for r in requirements}


def requirements_txt(name: str) -> dict[str, Requirement]:
    with open(osp.join(REPO, name), encoding="utf-8") as f:
        lines = [ln.split("#")[0].strip() for ln in f]
    return {canonical(Requirement(ln).name): Requirement(ln) for ln in lines if ln}


def test_the_version_is_written_once(setup_kwargs):
    from hamseg.version import __version__

    assert setup_kwargs["version"] == hamseg.__version__ == __version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    files = ["setup.py", "pyproject.toml"] + [
        osp.relpath(p, REPO)
        for p in glob.glob(osp.join(REPO, "hamseg", "**", "*.py"), recursive=True)
    ]
    written = []
    for rel in files:
        with open(osp.join(REPO, rel), encoding="utf-8") as f:
            if f'"{__version__}"' in f.read():
                written.append(rel.replace(osp.sep, "/"))
    assert written == ["hamseg/version.py"]


def test_license_is_apache_2(setup_kwargs):
    assert setup_kwargs["license"] == "Apache-2.0"
    with open(osp.join(REPO, "LICENSE"), encoding="utf-8") as f:
        text = f.read()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_mmcv_is_an_extra_and_plots_are_optional(setup_kwargs):
    extras = setup_kwargs["extras_require"]
    assert not any(n.startswith("mmcv") for n in names(setup_kwargs["install_requires"]))
    assert extras["lite"] == ["mmcv-lite==2.1.0"]
    assert str(requirements_txt("requirements.txt")["mmcv-lite"]) == "mmcv-lite==2.1.0"
    assert names(extras["plots"]) == {"seaborn", "pandas"}
    assert names(extras["plots"]) <= set(requirements_txt("requirements-dev.txt"))


def test_requirements_txt_pins_a_superset(setup_kwargs):
    pinned = requirements_txt("requirements.txt")
    for req in map(Requirement, setup_kwargs["install_requires"]):
        assert canonical(req.name) in pinned, f"{req.name}: add it to requirements.txt"


def _closure(requirements) -> set[str]:
    """Distributions that installing ``requirements`` brings (as installed here)."""
    todo, seen = [Requirement(r) for r in requirements], set()
    while todo:
        req = todo.pop()
        name = canonical(req.name)
        if name in seen or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        try:
            todo += [Requirement(r) for r in importlib.metadata.requires(req.name) or []]
        except importlib.metadata.PackageNotFoundError:
            pass
    return seen


def test_install_requires_cover_what_import_hamseg_imports(setup_kwargs):
    code = (
        "import sys, json, hamseg, importlib.metadata as md;"
        "dists = md.packages_distributions();"
        "tops = {m.split('.')[0] for m in sys.modules};"
        "print(json.dumps(sorted({d for t in tops for d in dists.get(t, [])})))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {canonical(d) for d in json.loads(result.stdout.splitlines()[-1])}
    brought = _closure(setup_kwargs["install_requires"] + setup_kwargs["extras_require"]["lite"])
    assert {"ftfy", "regex", "mmcv-lite", "mmsegmentation"} <= brought
    missing = imported - brought - {"hamseg", "setuptools"}  # setuptools: its _distutils_hack .pth
    assert not missing, f"import hamseg needs {sorted(missing)}: add them to install_requires"
    without_direct = _closure([r for r in setup_kwargs["install_requires"] if "ftfy" not in r])
    assert "ftfy" not in without_direct  # nothing else brings it: the check can fail


def test_readme_install_commands_are_unchanged():
    with open(osp.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert "pip install -r requirements.txt && pip install --no-deps -e ." in readme
    assert "pip install 'hamseg[lite]'" in readme and "hamseg[plots]" in readme


def test_metadata_has_home_page_project_urls_and_classifiers(setup_kwargs):
    assert setup_kwargs["url"].startswith("https://") and setup_kwargs["project_urls"]
    classifiers = setup_kwargs["classifiers"]
    assert "Intended Audience :: Science/Research" in classifiers
    minimum = setup_kwargs["python_requires"].removeprefix(">=")
    assert f"Programming Language :: Python :: {minimum}" in classifiers
    assert not any(c.startswith("License ::") for c in classifiers)  # license= says it (PEP 639)
