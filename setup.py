"""hamseg: Hamburger (ICLR 2021) for mmsegmentation 1.x.

From a checkout: ``pip install -r requirements.txt && pip install --no-deps -e .`` (README).
From a wheel or sdist: ``pip install 'hamseg[lite]'`` (mmcv-lite) or ``pip install hamseg`` next to
a compiled mmcv 2.0/2.1.

Like mmseg, the package carries its configs and tools: the build copies the top-level
``configs/``, ``tools/`` (its scripts, not the lab's code) and ``model-index.yml`` (the source of
truth) into ``hamseg/.mim/``, which makes ``hamseg::demo/...`` config names and ``mim
train/test/run hamseg`` work without a checkout. In a checkout (and so in an editable install)
``hamseg/.mim/`` holds links to the same files; projects/ is a checkout's only.

``package_dir={"": "."}`` makes setuptools' editable install put the checkout on ``sys.path`` (a
static ``.pth``) instead of a finder that comes after the working directory: with the finder,
``import hamseg`` in a folder that holds a clone named ``hamseg`` found the clone as a namespace
package (tests/packaging/test_packaging.py).
"""

import os
import os.path as osp
import re
import shutil

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = osp.dirname(osp.abspath(__file__))

#: What `import hamseg` and its configs need (torch, the OpenMMLab stack, what mmseg 1.2.2 imports
#: at import time without declaring it: ftfy, regex; TensorBoard for every config's visualizer).
#: No mmcv here: mmcv-lite and a compiled mmcv install into the same folder, so the choice is an
#: extra. requirements.txt pins the whole tested environment (a superset of this list).
INSTALL_REQUIRES = [
    "torch>=2.6",
    "mmengine==0.10.7",
    "mmsegmentation==1.2.2",
    "numpy>=1.24",
    "opencv-python>=4.8",
    "ftfy>=6.0",
    "regex>=2023.0",
    "tqdm>=4.60",
    "tensorboard>=2.14",
]

#: Optional parts, one line each (`pip install 'hamseg[lite,plots]'`).
EXTRAS_REQUIRE = {
    # mmcv without compiled ops; skip it if a compiled mmcv 2.0/2.1 is installed.
    "lite": ["mmcv-lite==2.1.0"],
    # mmseg's log plots: python tools/analysis_tools/analyze_logs.py LOG.json --keys loss.
    "plots": ["seaborn>=0.12", "pandas>=1.5"],
    # ONNX export and ONNX Runtime inference (tools/deploy/export_onnx.py, infer --backend).
    "deploy": ["onnx>=1.16", "onnxruntime>=1.18", "onnxscript>=0.1"],
}

#: Where users find the project (wheel METADATA: Home-page, Project-URL). No repository URL is
#: recorded in this project yet: Home-page is the paper's page until one is.
URLS = {
    "Paper": "https://arxiv.org/abs/2109.04553",
    "Reference implementation": "https://github.com/Gsunshine/Enjoy-Hamburger",
    "mmsegmentation": "https://github.com/open-mmlab/mmsegmentation",
}
CLASSIFIERS = [
    "Development Status :: 4 - Beta",
    "Intended Audience :: Science/Research",
    "Operating System :: OS Independent",
    "Programming Language :: Python :: 3",
    "Programming Language :: Python :: 3.10",
    "Programming Language :: Python :: 3.11",
    "Programming Language :: Python :: 3.12",
    "Topic :: Scientific/Engineering :: Artificial Intelligence",
    "Topic :: Scientific/Engineering :: Image Recognition",
]

#: Copied into hamseg/.mim/ by the build: relative to the repository root.
MIM_FILES = ("configs", "tools", "model-index.yml")
#: Which files of configs/ and tools/ a wheel carries; folders it leaves out (lab code).
MIM_CONFIG_SUFFIXES = (".py", ".yaml", ".yml", ".md", ".sh")
MIM_SKIPPED = ("__pycache__", "lab")


def read_version() -> str:
    """hamseg/version.py's ``__version__``, read without importing hamseg (nor its dependencies)."""
    with open(osp.join(HERE, "hamseg", "version.py"), encoding="utf-8") as f:
        match = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if match is None:
        raise RuntimeError("no __version__ in hamseg/version.py")
    return match.group(1)


def _ignore_non_configs(folder: str, names: list) -> list:
    return [
        n
        for n in names
        if n in MIM_SKIPPED
        or (osp.isfile(osp.join(folder, n)) and not n.endswith(MIM_CONFIG_SUFFIXES))
    ]


class BuildPyWithConfigs(build_py):
    """build_py that also copies :data:`MIM_FILES` into ``hamseg/.mim/``.

    An editable install builds nothing here: its ``hamseg/.mim/`` is the checkout's, whose entries
    are links to the top-level files.
    """

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        mim = osp.join(self.build_lib, "hamseg", ".mim")
        os.makedirs(mim, exist_ok=True)
        for name in MIM_FILES:
            src, dst = osp.join(HERE, name), osp.join(mim, name)
            if osp.isdir(dst) and not osp.islink(dst):
                shutil.rmtree(dst)
            elif osp.lexists(dst):
                os.remove(dst)
            if osp.isdir(src):
                shutil.copytree(src, dst, ignore=_ignore_non_configs)
            else:
                shutil.copyfile(src, dst)

    def _mim_outputs(self) -> list:
        out = []
        for name in MIM_FILES:
            src = osp.join(HERE, name)
            if osp.isfile(src):
                out.append(osp.join(self.build_lib, "hamseg", ".mim", name))
                continue
            for root, dirs, files in os.walk(src):
                dirs[:] = [d for d in dirs if d not in MIM_SKIPPED]
                rel = osp.relpath(root, HERE)
                out += [
                    osp.join(self.build_lib, "hamseg", ".mim", rel, f)
                    for f in files
                    if f.endswith(MIM_CONFIG_SUFFIXES)
                ]
        return out

    def get_outputs(self, include_bytecode: bool = True) -> list:
        outputs = super().get_outputs(include_bytecode)
        if getattr(self, "editable_mode", False):
            return outputs
        return outputs + self._mim_outputs()


setup(
    name="hamseg",
    version=read_version(),
    description="Hamburger matrix-decomposition context modules for mmsegmentation 1.x",
    long_description=open(osp.join(HERE, "README.md"), encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    url=URLS["Paper"],
    project_urls=URLS,
    classifiers=CLASSIFIERS,
    python_requires=">=3.10",
    packages=find_packages(include=["hamseg", "hamseg.*"]),
    package_dir={"": "."},
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
    cmdclass={"build_py": BuildPyWithConfigs},
    zip_safe=False,
)
