"""setup.py and the model index: one version, dependencies complete for ``import hamseg``, an
editable install that a folder named hamseg cannot shadow, a model index whose names resolve.
(The wheel's metadata: tests/packaging/test_wheel.py.)"""

from __future__ import annotations

import functools
import glob
import importlib.metadata
import json
import os
import os.path as osp
import re
import runpy
import shutil
import subprocess
import sys
import urllib.parse

import cv2
import numpy as np
import pytest
import setuptools
import yaml
from packaging.requirements import Requirement

import hamseg
from tests.conftest import REPO
from tests.helpers import make_checkpoint


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
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def requirements_txt(name: str) -> dict[str, Requirement]:
    with open(osp.join(REPO, name), encoding="utf-8") as f:
        lines = [line.split("#")[0].strip() for line in f]
    return {canonical(Requirement(line).name): Requirement(line) for line in lines if line}


def test_the_version_is_written_once(setup_kwargs):
    from hamseg.version import __version__

    assert setup_kwargs["version"] == hamseg.__version__ == __version__
    files = [
        "setup.py",
        "pyproject.toml",
        *glob.glob("hamseg/**/*.py", root_dir=REPO, recursive=True),
    ]
    written = [f for f in files if f'"{__version__}"' in open(osp.join(REPO, f)).read()]
    assert written == ["hamseg/version.py"]


def test_mmcv_is_an_extra_and_requirements_txt_pins_a_superset(setup_kwargs):
    install, extras = setup_kwargs["install_requires"], setup_kwargs["extras_require"]
    assert not any(canonical(Requirement(r).name).startswith("mmcv") for r in install)
    pinned = requirements_txt("requirements.txt")
    assert str(pinned["mmcv-lite"]) in extras["lite"]
    assert all(canonical(Requirement(r).name) in pinned for r in install)
    dev = requirements_txt("requirements-dev.txt")
    assert all(canonical(Requirement(r).name) in dev for r in extras["plots"] + extras["deploy"])


def _closure(requirements: list[str]) -> set[str]:
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
        "import sys, json, hamseg, importlib.metadata as md; dists = md.packages_distributions();"
        "tops = {m.split('.')[0] for m in sys.modules};"
        "print(json.dumps(sorted({d for t in tops for d in dists.get(t, [])})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {canonical(d) for d in json.loads(result.stdout.splitlines()[-1])}
    brought = _closure(setup_kwargs["install_requires"] + setup_kwargs["extras_require"]["lite"])
    missing = imported - brought - {"hamseg", "setuptools"}  # setuptools: its _distutils_hack .pth
    assert not missing, f"import hamseg needs {sorted(missing)}: add them to install_requires"
    assert "ftfy" not in _closure([r for r in setup_kwargs["install_requires"] if "ftfy" not in r])


def editable_checkout() -> str | None:
    """The folder hamseg is installed editable from (PEP 610's direct_url.json), else None."""
    try:
        info = json.loads(
            importlib.metadata.distribution("hamseg").read_text("direct_url.json") or "{}"
        )
    except importlib.metadata.PackageNotFoundError:
        return None
    editable = info.get("dir_info", {}).get("editable")
    return urllib.parse.urlparse(info["url"]).path if editable else None


def readme_snippet_beside_a_clone(python: str, checkout: str, folder) -> str:
    """Run the README's Python snippet (with the checkpoint and image it names) in ``folder``,
    which holds ``hamseg``, a link to the ``checkout``; returns ``hamseg.__file__`` there (None:
    a namespace package, the folder)."""
    with open(osp.join(REPO, "README.md"), encoding="utf-8") as f:
        (snippet,) = [
            b for b in re.findall(r"```python\n(.*?)```", f.read(), re.S) if "init_model" in b
        ]
    os.symlink(checkout, folder / "hamseg")
    make_checkpoint(str(folder / "iter_500.pth"))
    cv2.imwrite(str(folder / "image.png"), np.full((33, 41, 3), 128, np.uint8))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"OMP_NUM_THREADS": "1"}
    code = snippet + "\nimport hamseg\nprint(*result.pred_sem_seg.shape)\nprint(hamseg.__file__)\n"
    cmd = [python, "-c", code]
    result = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    *_, shape, found = result.stdout.strip().splitlines()
    assert shape == "33 41"  # the image's label map
    return found


def test_the_readme_snippet_beside_a_clone_named_hamseg_imports_the_package(tmp_path):
    """With setuptools' default finder, ``import hamseg`` took the clone folder (no
    __init__.py) for a namespace package and hamseg's adaptations never ran."""
    checkout = editable_checkout()
    if checkout is None or osp.realpath(checkout) != osp.realpath(REPO):
        pytest.skip(f"hamseg is not installed editable from this checkout ({checkout}); CI's is")
    found = readme_snippet_beside_a_clone(sys.executable, REPO, tmp_path)
    assert osp.realpath(found) == osp.join(osp.realpath(REPO), "hamseg", "__init__.py")


@pytest.mark.slow
def test_the_readme_install_line_gives_an_install_no_folder_can_shadow(tmp_path):
    """``pip install --no-deps -e .`` of a copy of this checkout into a fresh venv (the shared
    packages through a path file), then the snippet beside a clone named hamseg."""
    venv, checkout = tmp_path / "venv", tmp_path / "checkout"
    skip = shutil.ignore_patterns("*.egg-info", "__pycache__", "build", "work_dirs", "data", ".git")
    shutil.copytree(REPO, checkout, symlinks=True, ignore=skip)
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=600
    )
    (site,) = glob.glob(str(venv / "lib" / "python*" / "site-packages"))
    shared = [p for p in sys.path if p.endswith("site-packages") and osp.isdir(p)]
    with open(osp.join(site, "shared.pth"), "w") as f:
        f.write("\n".join(shared) + "\n")
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", "."]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run(pip, cwd=checkout, env=env, check=True, capture_output=True, timeout=600)
    user = tmp_path / "user"
    user.mkdir()
    found = readme_snippet_beside_a_clone(python, str(checkout), user)
    assert osp.realpath(found) == osp.join(osp.realpath(checkout), "hamseg", "__init__.py")


@functools.cache
def load(config: str):
    from mmengine.config import Config

    return Config.fromfile(osp.realpath(config))


def models() -> list[dict]:
    from mmengine.infer import BaseInferencer

    return list(BaseInferencer._get_models_from_metafile(REPO))


def test_every_name_resolves_to_a_packaged_config_that_loads():
    """mmseg's ``list_models`` gives whole names (a string ``Alias`` would give its letters),
    unique in any case; each resolves to a config that imports nothing but hamseg."""
    from mmseg.apis import MMSegInferencer

    from hamseg.apis.inference import resolve_model_name

    names = [n for m in models() for n in [m["Name"], *m.get("Alias", [])]]
    assert sorted(MMSegInferencer.list_models("hamseg")) == sorted(names)
    assert len(names) == len({n.lower() for n in names}) and min(map(len, names)) > 5
    for config in {resolve_model_name(name)[0] for name in names}:
        cfg = load(config)
        imports = cfg.get("custom_imports", {}).get("imports", [])
        assert "decode_head" in cfg.model and all(m.split(".")[0] == "hamseg" for m in imports)


def test_every_leaf_config_has_an_entry_and_its_weights_are_where_training_writes_them():

    listed = {m["Config"] for m in models()}
    folders = [f"configs/{f.split('/')[1]}/metafile.yaml" for f in listed]
    with open(osp.join(REPO, "model-index.yml"), encoding="utf-8") as f:
        assert sorted(yaml.safe_load(f)["Import"]) == sorted(set(folders))
    for metafile in set(folders):
        leaves = glob.glob(osp.join(REPO, osp.dirname(metafile), "**", "*.py"), recursive=True)
        for rel in (osp.relpath(p, REPO) for p in leaves if "/_base_/" not in p):
            assert rel in listed, f"{rel}: add it to {metafile}"
    for model in models():
        config = model["Config"]
        if model["Weights"].startswith("data/pretrained/"):  # a converted release checkpoint
            continue
        cfg = load(osp.join(REPO, config))
        work_dir = cfg.get("work_dir") or f"work_dirs/{osp.basename(config)[:-3]}"
        if config.startswith("configs/demo/"):
            work_dir = f"work_dirs/demo/{osp.basename(config)[:-3]}"  # tools/run_demo.py's
        if "/ablations/" in config:  # one base config, a folder per ablation
            work_dir = f"work_dirs/ablations/{model['Name'].removeprefix('hamnet-ablation_')}"
        assert model["Weights"] == f"{work_dir}/iter_{cfg.train_cfg.max_iters}.pth", config


def test_every_readme_results_row_agrees_with_its_metafile():
    for metafile in glob.glob(osp.join(REPO, "configs", "*", "metafile.yaml")):
        with open(metafile, encoding="utf-8") as f:
            entries = yaml.safe_load(f)["Models"]
        with open(osp.join(osp.dirname(metafile), "README.md"), encoding="utf-8") as f:
            rows = [line for line in f if line.startswith("|")]
        for model in (m for m in entries if "Results" in m):
            target = model["Config"].split("/", 2)[2]
            (row,) = [r for r in rows if f"]({target})" in r]
            missing = [v for v in model["Results"]["Metrics"].values() if str(v) not in row]
            assert not missing, (model["Name"], missing, row)
