"""hamseg's registry nodes: one child (scope 'hamseg') of each of mmseg's registries.

hamseg registers its classes into mmseg's registries; its nodes find them, mmseg's and mmengine's
through their parents, so ``hamseg::`` names (mmengine's ``get_model``, ``get_config``),
``default_scope='hamseg'`` and ``DefaultScope`` behave as for ``mmseg::``.
"""

from mmengine.registry import Registry
from mmseg import registry as _mmseg

__all__ = list(_mmseg.__all__)
for _name in __all__:
    _parent = getattr(_mmseg, _name)
    globals()[_name] = Registry(_parent.name, parent=_parent, scope="hamseg", locations=["hamseg"])
