"""mmseg's ``MMSegInferencer`` on hamseg's configs and model names.

mmseg 1.2.2's inferencer has two gaps for a plugin with loaders and a model index of its own:

- ``_init_pipeline`` looks for the image loader by its type name, ``LoadImageFromFile`` (it swaps
  in ``InferencerLoader``, which takes arrays and paths alike), and drops ``LoadAnnotations`` by
  name. hamseg's configs use ``CheckedLoadImageFromFile`` and ``CheckedLoadAnnotations`` (the same
  transforms, with errors naming the file), so every hamseg config fails with "LoadImageFromFile
  is not found in the test pipeline". The pipeline is given mmseg's names first
  (:func:`as_mmseg_loaders`).
- a model name is looked up in mmseg's model index only ("Cannot find model: ... in mmseg"). A
  name that mmseg's index does not have is looked up in hamseg's (``hamseg/.mim/model-index.yml``,
  :func:`resolve_model_name`); mmseg's names keep resolving to mmseg's models. A
  ``hamseg::<folder>/<config>.py`` name (not a file path, so mmengine takes it for a model name)
  is read as that packaged config.

:func:`install` (run by ``import hamseg``) wraps these two methods of ``MMSegInferencer``, once;
nothing else changes. Loading the weights stays mmseg's (non-strict, like mmseg's ``init_model``);
:class:`hamseg.apis.HamSegInferencer` loads them strictly.
"""

from __future__ import annotations

import functools
import os.path as osp
from collections.abc import Callable, MutableSequence
from typing import Any, Optional

from .package_lookup import PACKAGE_DIR

__all__ = ["CHECKED_LOADERS", "as_mmseg_loaders", "index_root", "install", "resolve_model_name"]

#: hamseg's checked loaders -> the mmseg transforms they extend (same arguments otherwise).
CHECKED_LOADERS = {
    "CheckedLoadImageFromFile": "LoadImageFromFile",
    "CheckedLoadAnnotations": "LoadAnnotations",
}


def index_root() -> str:
    """The folder holding hamseg's ``model-index.yml`` and ``configs/`` (the package's .mim)."""
    return osp.join(PACKAGE_DIR, ".mim")


def resolve_model_name(name: str) -> Optional[tuple[str, str]]:
    """(config path, weights path) of a hamseg model name or alias (any case), or None.

    Args:
        name: A ``Name`` or ``Alias`` of hamseg's model index, e.g.
            ``'hamhead-nmf_r18-d8_context-shapes'`` or ``'ham_voc'``.

    Returns:
        The config's absolute path and the index's ``Weights`` (a local path: nothing is
        hosted), or None if hamseg's index has no such name.
    """
    from mmengine.infer import BaseInferencer

    root, wanted = index_root(), name.lower()
    for model in BaseInferencer._get_models_from_metafile(root):
        aliases = model.get("Alias", [])
        aliases = [aliases] if isinstance(aliases, str) else aliases
        if wanted == model["Name"].lower() or wanted in (a.lower() for a in aliases):
            weights = model.get("Weights", "")
            weights = weights[0] if isinstance(weights, list) else weights
            return osp.join(root, model["Config"]), weights
    return None


def as_mmseg_loaders(pipeline: MutableSequence[Any]) -> None:
    """Rename hamseg's checked loaders in a pipeline config (in place) to the mmseg transforms
    they extend, which mmseg's prediction paths find by name."""
    for transform in pipeline:
        if transform.get("type") in CHECKED_LOADERS:
            transform["type"] = CHECKED_LOADERS[transform["type"]]


def _with_mmseg_loader_names(init_pipeline: Callable) -> Callable:
    """``MMSegInferencer._init_pipeline`` that first gives the checked loaders mmseg's names."""

    @functools.wraps(init_pipeline)
    def _init_pipeline(self, cfg):  # noqa: ANN001, ANN202  (mmseg's signature)
        as_mmseg_loaders(cfg.test_dataloader.dataset.pipeline)
        return init_pipeline(self, cfg)

    _init_pipeline._hamseg_wraps = init_pipeline  # type: ignore[attr-defined]
    return _init_pipeline


def _with_hamseg_index(load: Callable) -> Callable:
    """``_load_model_from_metafile`` that looks in hamseg's index when mmseg's has no such name."""

    @functools.wraps(load)
    def _load_model_from_metafile(self, model: str):  # noqa: ANN001, ANN202
        from mmengine.config import Config

        if model.startswith("hamseg::"):  # a packaged config, not a file path: no weights
            return Config.fromfile(model), None
        try:
            return load(self, model)
        except ValueError as err:
            if not str(err).startswith("Cannot find model"):
                raise
            found = resolve_model_name(model)
            if found is None:
                raise ValueError(
                    f"Cannot find model: {model} in mmseg's or hamseg's model index"
                ) from None
        config, weights = found
        return Config.fromfile(config), weights

    _load_model_from_metafile._hamseg_wraps = load  # type: ignore[attr-defined]
    return _load_model_from_metafile


def install() -> bool:
    """Wrap ``MMSegInferencer._init_pipeline`` and ``_load_model_from_metafile`` (idempotent).

    Returns:
        True if wrapped now, False if they already were.
    """
    from mmseg.apis import MMSegInferencer

    changed = False
    # _load_model_from_metafile is mmengine's BaseInferencer's: set on MMSegInferencer only.
    for name, wrap in (
        ("_init_pipeline", _with_mmseg_loader_names),
        ("_load_model_from_metafile", _with_hamseg_index),
    ):
        current = getattr(MMSegInferencer, name)
        if not hasattr(current, "_hamseg_wraps"):
            setattr(MMSegInferencer, name, wrap(current))
            changed = True
    return changed
