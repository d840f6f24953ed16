"""Leaf helpers of every layer (they import no other hamseg subpackage)."""


def register_all_modules(init_default_scope: bool = True) -> None:
    """mmseg's ``register_all_modules`` for scope 'hamseg' (mmengine's ``get_model`` calls it)."""
    from mmengine.registry import init_default_scope as init_scope
    from mmseg.utils import register_all_modules as register_mmseg

    import hamseg.registry  # noqa: F401

    register_mmseg(False)
    if init_default_scope:
        init_scope("hamseg")
