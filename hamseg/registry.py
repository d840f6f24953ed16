"""hamseg's registry nodes: one child (scope 'hamseg') of each of mmseg's registries.

hamseg registers its classes into mmseg's registries; its nodes find them, mmseg's and mmengine's
through their parents, so ``hamseg::`` names (mmengine's ``get_model``, ``get_config``),
``default_scope='hamseg'`` and ``DefaultScope`` behave as for ``mmseg::``. Each node imports
its parent's locations too (mmengine imports only the asked node's), so a Runner in scope
'hamseg' finds mmseg's lazily registered classes (e.g. ``SegLocalVisualizer``).
"""

from mmengine.registry import Registry
from mmseg import registry as _mmseg

__all__ = list(_mmseg.__all__)
for _name in __all__:
    _parent = getattr(_mmseg, _name)
    _locations = ["hamseg", *getattr(_parent, "_locations", [])]  # mmengine 0.10.7's attribute
    globals()[_name] = Registry(_parent.name, parent=_parent, scope="hamseg", locations=_locations)
