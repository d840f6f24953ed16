"""Leaf helpers of every layer (they import no other hamseg subpackage)."""


def register_all_modules(init_default_scope: bool = True) -> None:
    """mmseg's ``register_all_modules`` for scope 'hamseg' (mmengine's ``get_model`` calls it)."""
    import datetime

    from mmengine.registry import DefaultScope
    from mmseg.utils import register_all_modules as register_mmseg

    import hamseg.registry  # noqa: F401

    register_mmseg(False)
    current = DefaultScope.get_current_instance()
    if init_default_scope and (current is None or current.scope_name != "hamseg"):
        DefaultScope.get_instance(f"hamseg-{datetime.datetime.now()}", scope_name="hamseg")
