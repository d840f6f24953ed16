"""mmseg's Python APIs on hamseg's models: ``init_model``, ``inference_model`` and an
``MMSegInferencer`` that knows hamseg's model names.

``import hamseg`` (done by importing this module) makes mmseg's own APIs work on an mmcv-lite
stack and registers hamseg's modules; hamseg's configs use the checked loaders, which mmseg's
prediction-only paths accept. :class:`HamSegInferencer` is mmseg's ``MMSegInferencer`` that also
resolves the names of hamseg's model index (``model-index.yml``: long config names and the short
aliases such as ``ham_voc``) to their configs; weights are given by path (nothing is hosted), or
default to the index's local path when that file exists.
"""

from __future__ import annotations

import os.path as osp
from typing import Any, Optional

from mmengine.infer import BaseInferencer
from mmseg.apis import MMSegInferencer, inference_model, init_model

import hamseg

#: hamseg's checked loaders -> the mmseg transforms they replace (same arguments otherwise).
_MMSEG_NAMES = {
    "CheckedLoadImageFromFile": "LoadImageFromFile",
    "CheckedLoadAnnotations": "LoadAnnotations",
}

__all__ = ["HamSegInferencer", "inference_model", "init_model", "resolve_model_name"]


def _index_root() -> str:
    """The folder holding hamseg's model-index.yml and configs/ (the package's .mim)."""
    return osp.join(osp.dirname(osp.abspath(hamseg.__file__)), ".mim")


def resolve_model_name(name: str) -> Optional[tuple[str, str]]:
    """(config path, weights path) of a hamseg model name or alias, or None if unknown."""
    root = _index_root()
    wanted = name.lower()
    for model in BaseInferencer._get_models_from_metafile(root):
        aliases = model.get("Alias", [])
        aliases = [aliases] if isinstance(aliases, str) else aliases
        if wanted == model["Name"].lower() or wanted in (a.lower() for a in aliases):
            weights = model.get("Weights", "")
            return osp.join(root, model["Config"]), weights[0] if isinstance(
                weights, list
            ) else weights
    return None


class HamSegInferencer(MMSegInferencer):
    """``MMSegInferencer`` for hamseg's configs, checkpoints and model names.

    Args:
        model: A config path, a config, or a hamseg model name (``ham_voc``,
            ``hamhead-nmf_r18-d8_context-shapes``, ...); other names go to mmseg's index.
        weights: Checkpoint path; for a hamseg name, default the index's local ``Weights`` path
            if that file exists.
        **kwargs: ``MMSegInferencer``'s (``classes``, ``palette``, ``device``, ...).
    """

    def __init__(self, model: Any, weights: Optional[str] = None, **kwargs: Any) -> None:
        if isinstance(model, str) and not osp.isfile(model):
            found = resolve_model_name(model)
            if found is not None:
                model, indexed = found
                if weights is None and osp.isfile(indexed):
                    weights = indexed
        super().__init__(model, weights, **kwargs)

    def _init_pipeline(self, cfg: Any) -> Any:
        """mmseg's inference pipeline, after naming hamseg's checked loaders as mmseg's: the
        inferencer looks for ``LoadImageFromFile`` (to load arrays and paths alike) and drops
        ``LoadAnnotations`` by their type names."""
        for transform in cfg.test_dataloader.dataset.pipeline:
            if transform.get("type") in _MMSEG_NAMES:
                transform["type"] = _MMSEG_NAMES[transform["type"]]
        return super()._init_pipeline(cfg)
