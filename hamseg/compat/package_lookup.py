"""Config paths across packages: ``mmseg::`` without ``pkg_resources``, and ``hamseg::``.

mmengine 0.10.7 resolves ``_base_ = 'mmseg::...'`` through ``is_installed`` and
``get_installed_path``, which import ``pkg_resources``; setuptools >= 81 no longer ships it.
requirements.txt pins setuptools below 81, and where ``pkg_resources`` is absent anyway
:func:`install` replaces the two lookups with ``importlib.metadata`` equivalents.

hamseg ships its configs inside the package, as mmseg does (``hamseg/.mim/configs`` and
``hamseg/.mim/model-index.yml``: copies in a wheel, links to the top-level ``configs/`` in a
checkout), and :func:`register_hamseg` lets mmengine find them:

- ``MODULE2PACKAGE`` (alias ``PKG2PROJECT``) gets ``hamseg``: mmengine refuses any other
  ``package::`` prefix ("mmengine does not support to load hamseg config").
- ``get_installed_path('hamseg')`` is the folder of the hamseg package that is imported. mmengine's
  own answer, ``<site-packages>/hamseg``, does not exist for an editable install.
- a ``hamseg::`` base config is read like a relative one, without an mmengine scope: hamseg
  registers everything into mmseg's registries and its configs set ``default_scope = 'mmseg'``.
  mmengine would give every base variable with a ``type`` the scope ``hamseg`` (the prefix), and
  building then fails: "EncoderDecoder is not in the mmengine::model registry", and a shared
  ``norm_cfg`` carrying ``_scope_`` reaches ``nn.BatchNorm2d(..., _scope_=...)``.
- ``Config.fromfile('hamseg::demo/x.py')`` loads the packaged config (mmengine accepts ``pkg::``
  only in ``_base_`` and in ``mmengine.hub.get_config``, which also works).

``hamseg::`` works once hamseg is imported (mmengine reads ``_base_`` before a config's
``custom_imports``): ``import hamseg`` first, as on an mmcv-lite stack anyway.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os.path as osp
from collections.abc import Callable
from typing import Optional

from hamseg.utils.errors import require_file

__all__ = [
    "PACKAGE_DIR",
    "config_file",
    "get_installed_path",
    "hamseg_config_path",
    "install",
    "is_installed",
    "register_hamseg",
]

_PREFIX = "hamseg::"
#: The folder of the imported hamseg package (a checkout's or an installed copy).
PACKAGE_DIR = osp.dirname(osp.dirname(osp.abspath(__file__)))


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


def _pkg_resources_present() -> bool:
    try:
        return importlib.util.find_spec("pkg_resources") is not None
    except (ImportError, ValueError):  # a None entry in sys.modules: "import pkg_resources" fails
        return False


def _lookup_modules() -> list:
    """The mmengine modules that hold their own reference to the two lookups."""
    import mmengine.config.config as config_module
    import mmengine.hub.hub as hub_module
    import mmengine.utils as utils
    import mmengine.utils.package_utils as package_utils

    return [package_utils, utils, config_module, hub_module]


def install() -> bool:
    """Patch mmengine's lookups if ``pkg_resources`` cannot be imported.

    Returns:
        True if patched, False if ``pkg_resources`` is present (nothing changed).
    """
    if _pkg_resources_present():
        return False
    for module in _lookup_modules():
        module.is_installed = is_installed
        module.get_installed_path = get_installed_path
    return True


def hamseg_config_path(name: str) -> str:
    """Absolute path of a packaged hamseg config, ``name`` relative to ``configs/``.

    Args:
        name: e.g. ``'demo/hamhead-nmf_r18-d8_context-shapes.py'`` (a ``hamseg::`` prefix is
            accepted and dropped).

    Raises:
        FileNotFoundError: No such config in the installed package.
    """
    name = name[len(_PREFIX) :] if name.startswith(_PREFIX) else name
    path = osp.join(PACKAGE_DIR, ".mim", "configs", name)
    if not osp.isfile(path):
        raise FileNotFoundError(f"no hamseg config {name!r} (looked for {path})")
    return path


def _hamseg_aware(lookup: Callable[[str], str]) -> Callable[[str], str]:
    """``get_installed_path`` that answers 'hamseg' with the imported package's folder."""

    def get_path(package: str) -> str:
        if package == "hamseg":
            return PACKAGE_DIR
        return lookup(package)

    get_path._hamseg_wraps = lookup  # type: ignore[attr-defined]
    return get_path


def _no_scope_for_hamseg(get_cfg_path: Callable) -> Callable:
    """``Config._get_cfg_path`` that reads ``hamseg::`` bases without a scope, as relative ones."""

    def _get_cfg_path(cfg_path: str, filename: str) -> tuple[str, Optional[str]]:
        path, scope = get_cfg_path(cfg_path, filename)
        return path, None if scope == "hamseg" else scope

    _get_cfg_path._hamseg_wraps = get_cfg_path  # type: ignore[attr-defined]
    return staticmethod(_get_cfg_path)


def _fromfile_with_hamseg(fromfile: Callable) -> Callable:
    """``Config.fromfile`` that also takes ``'hamseg::<path under configs/>'``."""

    def _fromfile(filename, *args, **kwargs):
        if isinstance(filename, str) and filename.startswith(_PREFIX):
            filename = hamseg_config_path(filename)
        return fromfile(filename, *args, **kwargs)

    _fromfile._hamseg_wraps = fromfile  # type: ignore[attr-defined]
    _fromfile.__doc__ = fromfile.__doc__
    return staticmethod(_fromfile)


def register_hamseg() -> None:
    """Make ``hamseg::`` config paths work in mmengine (see the module docstring); idempotent."""
    from mmengine.config import Config
    from mmengine.config.utils import MODULE2PACKAGE

    MODULE2PACKAGE["hamseg"] = "hamseg"  # PKG2PROJECT is the same dict
    for module in _lookup_modules():
        if not hasattr(module.get_installed_path, "_hamseg_wraps"):
            module.get_installed_path = _hamseg_aware(module.get_installed_path)
    if not hasattr(Config._get_cfg_path, "_hamseg_wraps"):
        Config._get_cfg_path = _no_scope_for_hamseg(Config._get_cfg_path)
    if not hasattr(Config.fromfile, "_hamseg_wraps"):
        Config.fromfile = _fromfile_with_hamseg(Config.fromfile)


def config_file(config: str) -> str:
    """Path of a config argument: a file, or a packaged config named ``PACKAGE::DIR/FILE.py``.

    ``hamseg::demo/hamhead-nmf_r18-d8_context-shapes.py`` is a config shipped inside hamseg
    (``hamseg/.mim/configs``: it works from a pip install, without a checkout) and
    ``mmseg::fcn/fcn_r50-d8_4xb2-40k_cityscapes-512x1024.py`` one of mmseg's, the names a
    ``_base_`` takes. A file of that name in the current folder wins.

    Args:
        config: The config argument of a command line.

    Returns:
        The config file's path.

    Raises:
        FileNotFoundError: No such file; for a packaged name, no such package or config.
    """
    if osp.isfile(config) or "::" not in config:
        return require_file(config, "config file")
    from mmengine.config import Config
    from mmengine.config.utils import PKG2PROJECT
    from mmengine.utils import get_installed_path

    package = config.partition("::")[0]
    if package not in PKG2PROJECT:
        detail = (
            f"unknown package {package!r}: name hamseg::DIR/FILE.py, mmseg::DIR/FILE.py or a file"
        )
    else:
        try:
            if package == "hamseg":
                return hamseg_config_path(config)
            return require_file(Config._get_cfg_path(config, "")[0], "config file")
        except FileNotFoundError:
            folder = osp.join(get_installed_path(package), ".mim", "configs")
            detail = f"no such file in {folder}"
        except ImportError:
            detail = f"{package} is not installed"
        except ValueError:  # mmengine's name pattern
            detail = f"name a packaged config {package}::DIR/FILE.py"
    raise FileNotFoundError(f"config file not found: {config} ({detail})")
