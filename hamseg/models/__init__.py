"""Hamburger models: the hams (NMF, CD, VQ), the blocks and the heads, registered in mmseg's
``MODELS`` on import. Import :mod:`hamseg` (which patches the stack first), not this alone."""

from .decompositions import CD, NMF, VQ, MatrixDecomposition2D
from .ham_head import HamHead
from .ham_light_head import HamLightHead
from .hamburger import Hamburger
from .light_hamburger import LightHamburger
from .release_weights import HamResNetPretrained  # noqa: F401  (init_cfg 'HamResNetPretrained')

__all__ = [
    "CD",
    "NMF",
    "VQ",
    "MatrixDecomposition2D",
    "Hamburger",
    "HamHead",
    "HamLightHead",
    "LightHamburger",
]
