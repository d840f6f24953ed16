"""Hamburger models, registered in mmseg's ``MODELS``: the hams (NMF, CD, VQ), the block and the
heads; ``HamResNetPretrained`` in ``WEIGHT_INITIALIZERS``. Import :mod:`hamseg`, not this alone."""

from .decompositions import CD, NMF, VQ, MatrixDecomposition2D
from .ham_head import HamHead
from .ham_light_head import HamLightHead
from .hamburger import Hamburger
from .release_weights import HamResNetPretrained

__all__ = ["CD", "NMF", "VQ", "HamHead", "HamLightHead", "Hamburger", "MatrixDecomposition2D"]
__all__ += ["HamResNetPretrained"]
