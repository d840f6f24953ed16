"""hamseg's registry nodes: a child (scope 'hamseg') of each of mmseg's registries, so that
``hamseg::`` names and ``default_scope='hamseg'`` work as ``mmseg::`` ones do. Each node also
imports its parent's locations (mmengine imports only the asked node's)."""

from mmengine.registry import Registry
from mmseg import registry as _mmseg

__all__ = list(_mmseg.__all__)
for _name in __all__:
    _parent = getattr(_mmseg, _name)
    _locations = ["hamseg", *getattr(_parent, "_locations", [])]  # mmengine 0.10.7's attribute
    globals()[_name] = Registry(_parent.name, parent=_parent, scope="hamseg", locations=_locations)
