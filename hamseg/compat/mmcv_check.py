"""One clear line when no mmcv is installed at all.

mmseg 1.2.2 needs an mmcv 2.0/2.1 and hamseg leaves the choice to the user (setup.py's extras):
``pip install 'hamseg[lite]'`` brings mmcv-lite, a user with a compiled mmcv installs plain
``hamseg``. Without either, ``import mmseg`` fails deep inside its own imports; :func:`require_mmcv`
turns that into one ``ImportError`` that says what to install.
"""

from __future__ import annotations

MISSING_MMCV_MESSAGE = (
    "hamseg needs mmcv 2.0/2.1 and none is installed: run pip install 'hamseg[lite]' (mmcv-lite "
    "2.1.0, no compiled ops), or install a compiled mmcv 2.0/2.1 built for your torch and CUDA."
)


def require_mmcv() -> None:
    """Import mmcv, or raise ``ImportError(MISSING_MMCV_MESSAGE)`` if it is not installed.

    An mmcv that is installed but fails to import for another reason keeps its own error.
    """
    try:
        import mmcv  # noqa: F401
    except ModuleNotFoundError as err:
        if err.name != "mmcv":
            raise
        raise ImportError(MISSING_MMCV_MESSAGE) from None


require_mmcv()
