"""hamseg: Hamburger (ICLR 2021) for mmsegmentation 1.x. Install with `pip install -e .`."""

from setuptools import find_packages, setup

setup(
    name="hamseg",
    version="0.1.0",
    description="Hamburger matrix-decomposition context modules for mmsegmentation 1.x",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.9",
    packages=find_packages(include=["hamseg", "hamseg.*"]),
    # mmcv is deliberately not required here: requirements.txt brings mmcv-lite, and a user with a
    # compiled mmcv keeps it (README, "Keeping a compiled mmcv").
    install_requires=["torch>=2.6", "mmengine==0.10.7", "mmsegmentation==1.2.2"],
    license="Apache-2.0",
)
