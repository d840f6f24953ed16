"""Config names across packages: ``mmseg::`` without ``pkg_resources`` (gone in setuptools 81,
pypa/setuptools#5007: :func:`install` puts ``importlib`` lookups in place of mmengine 0.10.7's
two), and ``hamseg::`` for this package's ``.mim/configs``, read without a scope as a relative
base is (wrapping mmengine's private ``Config._get_cfg_path`` and ``Config.fromfile``)."""

import importlib.util
import os.path as osp

import mmengine.config.config as config_module
import mmengine.hub.hub as hub_module
import mmengine.utils
import mmengine.utils.package_utils as package_utils
from mmengine.config import Config
from mmengine.config.utils import PKG2PROJECT

from hamseg.utils.errors import require_file

PACKAGE_DIR = osp.dirname(osp.dirname(osp.abspath(__file__)))
_LOOKUP_MODULES = (package_utils, mmengine.utils, config_module, hub_module)  # each holds both


def get_installed_path(package: str) -> str:
    """The folder of a module, or of a project's module (``mmsegmentation``: ``mmseg``)."""
    module = {project: module for module, project in PKG2PROJECT.items()}.get(package, package)
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"{package} is not installed", name=package)
    return osp.dirname(spec.origin)


def is_installed(package: str) -> bool:
    try:
        return bool(get_installed_path(package))
    except ModuleNotFoundError:
        return False


def install() -> bool:
    """Replace mmengine's lookups if ``pkg_resources`` cannot be imported; whether it did."""
    if importlib.util.find_spec("pkg_resources") is not None:
        return False
    for module in _LOOKUP_MODULES:
        module.is_installed, module.get_installed_path = is_installed, get_installed_path
    return True


def register_hamseg() -> None:
    """Make ``hamseg::`` config names work in mmengine; once."""
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
            filename = _get_cfg_path(filename, "")[0]
        return fromfile(filename, *args, **kwargs)

    Config._get_cfg_path, Config.fromfile = staticmethod(_get_cfg_path), staticmethod(_fromfile)


def config_file(config: str) -> str:
    """Path of a config argument: a file, else ``PACKAGE::DIR/FILE.py``; else FileNotFoundError."""
    if osp.isfile(config) or "::" not in config:
        return require_file(config, "config file")
    try:
        return require_file(Config._get_cfg_path(config, "")[0], "config file")
    except (FileNotFoundError, ImportError, ValueError, AssertionError):  # mmengine's checks
        where = "hamseg::DIR/FILE.py, mmseg::DIR/FILE.py: a file under their configs/"
        raise FileNotFoundError(f"config file not found: {config} ({where})") from None


REPLACED: bool = install()  # no pkg_resources
register_hamseg()
