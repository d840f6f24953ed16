"""Config paths across packages: ``mmseg::`` without ``pkg_resources``, and ``hamseg::``.

mmengine 0.10.7 finds ``mmseg::`` bases through ``pkg_resources``, which setuptools removed (81,
pypa/setuptools#5007): where it cannot be imported, :func:`install` puts ``importlib.metadata``
lookups in place of mmengine's two. :func:`register_hamseg` resolves ``hamseg::`` to the imported
package's ``.mim/configs`` (also from a checkout or an editable install, where mmengine's
lookup misses it), read without a scope as a relative base is; it wraps mmengine's private
``Config._get_cfg_path`` and ``Config.fromfile``, pinned by tests/compat/test_upstream_canaries.py.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os.path as osp

import mmengine.config.config as config_module
import mmengine.hub.hub as hub_module
import mmengine.utils
import mmengine.utils.package_utils as package_utils
from mmengine.config import Config
from mmengine.config.utils import PKG2PROJECT

from hamseg.utils.errors import require_file

#: The folder of the imported hamseg package (a checkout's or an installed copy).
PACKAGE_DIR = osp.dirname(osp.dirname(osp.abspath(__file__)))
#: The mmengine modules that hold their own reference to the two lookups.
_LOOKUP_MODULES = (package_utils, mmengine.utils, config_module, hub_module)


def is_installed(package: str) -> bool:
    """True if a distribution or an importable module is named ``package``."""
    try:
        return bool(importlib.metadata.distribution(package))
    except importlib.metadata.PackageNotFoundError:
        spec = importlib.util.find_spec(package)
        return spec is not None and spec.origin is not None


def get_installed_path(package: str) -> str:
    """Directory of the module that ``package`` (a distribution or module name) provides."""
    try:
        top_level = importlib.metadata.distribution(package).read_text("top_level.txt") or ""
        module = (top_level.split() or [package.replace("-", "_")])[0]
    except importlib.metadata.PackageNotFoundError:
        module = package
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise importlib.metadata.PackageNotFoundError(package)
    return osp.dirname(spec.origin)


def install() -> bool:
    """Replace mmengine's lookups if ``pkg_resources`` cannot be imported; whether it did."""
    try:
        if importlib.util.find_spec("pkg_resources") is not None:
            return False
    except (ImportError, ValueError):  # None in sys.modules: "import pkg_resources" fails
        pass
    for module in _LOOKUP_MODULES:
        module.is_installed, module.get_installed_path = is_installed, get_installed_path
    return True


def hamseg_config_path(name: str) -> str:
    """Path of a packaged config, ``name`` relative to ``configs/`` (``hamseg::`` may lead)."""
    name = name.removeprefix("hamseg::")
    path = osp.join(PACKAGE_DIR, ".mim", "configs", name)
    if not osp.isfile(path):
        raise FileNotFoundError(f"no hamseg config {name!r} (looked for {path})")
    return path


def register_hamseg() -> None:
    """Make ``hamseg::`` config names work in mmengine (see the module docstring); once."""
    if "hamseg" in PKG2PROJECT:
        return
    PKG2PROJECT["hamseg"] = "hamseg"  # MODULE2PACKAGE is the same dict
    for module in _LOOKUP_MODULES:
        lookup = module.get_installed_path
        module.get_installed_path = lambda p, f=lookup: PACKAGE_DIR if p == "hamseg" else f(p)
    get_cfg_path, fromfile = Config._get_cfg_path, Config.fromfile

    def _get_cfg_path(cfg_path: str, filename: str) -> tuple[str, str | None]:
        path, scope = get_cfg_path(cfg_path, filename)
        return path, None if scope == "hamseg" else scope

    def _fromfile(filename, *args, **kwargs):  # noqa: ANN001, ANN202 (mmengine's signature)
        if isinstance(filename, str) and filename.startswith("hamseg::"):
            filename = hamseg_config_path(filename)
        return fromfile(filename, *args, **kwargs)

    Config._get_cfg_path, Config.fromfile = staticmethod(_get_cfg_path), staticmethod(_fromfile)


def config_file(config: str) -> str:
    """Path of a config argument: a file, or ``PACKAGE::DIR/FILE.py`` (``hamseg::``,
    ``mmseg::``; a file of that name in the current folder wins); else FileNotFoundError."""
    if osp.isfile(config) or "::" not in config:
        return require_file(config, "config file")
    package = config.partition("::")[0]
    detail = f"unknown package {package!r}: name hamseg::DIR/FILE.py, mmseg::DIR/FILE.py or a file"
    if package in PKG2PROJECT:
        try:
            if package == "hamseg":
                return hamseg_config_path(config)
            return require_file(Config._get_cfg_path(config, "")[0], "config file")
        except FileNotFoundError:
            folder = mmengine.utils.get_installed_path(package)
            detail = f"no such file in {osp.join(folder, '.mim', 'configs')}"
        except ImportError:
            detail = f"{package} is not installed"
        except ValueError:  # mmengine's name pattern
            detail = f"name a packaged config {package}::DIR/FILE.py"
    raise FileNotFoundError(f"config file not found: {config} ({detail})")


#: Whether mmengine's lookups were replaced (no pkg_resources), set on import.
REPLACED: bool = install()
register_hamseg()
