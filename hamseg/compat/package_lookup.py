"""``mmseg::`` config paths without ``pkg_resources``.

mmengine 0.10.7 resolves ``_base_ = 'mmseg::...'`` through ``is_installed`` and
``get_installed_path``, which import ``pkg_resources``; setuptools >= 81 no longer ships it.
requirements.txt pins setuptools below 81, and where ``pkg_resources`` is absent anyway
:func:`install` replaces the two lookups with ``importlib.metadata`` equivalents.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os.path as osp

__all__ = ["get_installed_path", "install", "is_installed"]


def is_installed(package: str) -> bool:
    """True if a distribution or an importable module is named ``package``."""
    try:
        importlib.metadata.distribution(package)
        return True
    except importlib.metadata.PackageNotFoundError:
        spec = importlib.util.find_spec(package)
        return spec is not None and spec.origin is not None


def get_installed_path(package: str) -> str:
    """Directory of the module that ``package`` (a distribution or module name) provides."""
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        top_level = (dist.read_text("top_level.txt") or "").split()
        module = top_level[0] if top_level else package.replace("-", "_")
    else:
        module = package
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise importlib.metadata.PackageNotFoundError(package)
    return osp.dirname(spec.origin)


def install() -> bool:
    """Patch mmengine's lookups if ``pkg_resources`` cannot be imported.

    Returns:
        True if patched, False if ``pkg_resources`` is present (nothing changed).
    """
    try:
        present = importlib.util.find_spec("pkg_resources") is not None
    except (ImportError, ValueError):  # a None entry in sys.modules: "import pkg_resources" fails
        present = False
    if present:
        return False
    import mmengine.config.config as config_module
    import mmengine.hub.hub as hub_module
    import mmengine.utils as utils
    import mmengine.utils.package_utils as package_utils

    for module in (package_utils, utils, config_module, hub_module):
        module.is_installed = is_installed
        module.get_installed_path = get_installed_path
    return True
