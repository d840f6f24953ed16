"""mmseg 1.2.2's ``MMSegInferencer`` on hamseg's configs and model names.

Its ``_init_pipeline`` finds loaders by type name ("LoadImageFromFile is not found in the test
pipeline"): hamseg's ``CheckedLoad*`` get mmseg's names first. Its model lookup knows mmseg's
index only ("Cannot find model"): hamseg's ``.mim/model-index.yml`` and ``hamseg::`` configs too.
"""

from __future__ import annotations

import functools
import os.path as osp
from collections.abc import MutableSequence
from typing import Any

from mmengine.config import Config
from mmengine.infer import BaseInferencer
from mmseg.apis import MMSegInferencer

from .package_lookup import PACKAGE_DIR

#: hamseg's checked loaders -> the mmseg transforms they extend (same arguments otherwise).
CHECKED_LOADERS = {
    "CheckedLoadImageFromFile": "LoadImageFromFile",
    "CheckedLoadAnnotations": "LoadAnnotations",
}


def resolve_model_name(name: str) -> tuple[str, str] | None:
    """(config path, weights path) of a ``Name`` or ``Alias`` (any case) of hamseg's model
    index, e.g. ``'ham_voc'``; None if it has no such name. Weights are local paths."""
    root, wanted = osp.join(PACKAGE_DIR, ".mim"), name.lower()
    for model in BaseInferencer._get_models_from_metafile(root):
        if wanted in (model["Name"].lower(), *(a.lower() for a in model.get("Alias", []))):
            weights = model.get("Weights", "")
            weights = weights[0] if isinstance(weights, list) else weights
            return osp.join(root, model["Config"]), weights
    return None


def as_mmseg_loaders(pipeline: MutableSequence[Any]) -> None:
    """Rename hamseg's checked loaders in a pipeline config (in place) to mmseg's names."""
    for transform in pipeline:
        if transform.get("type") in CHECKED_LOADERS:
            transform["type"] = CHECKED_LOADERS[transform["type"]]


def install() -> None:
    """Wrap ``MMSegInferencer._init_pipeline`` and ``_load_model_from_metafile``, once."""
    init_pipeline, load = MMSegInferencer._init_pipeline, MMSegInferencer._load_model_from_metafile
    if getattr(load, "__wrapped__", None) is BaseInferencer._load_model_from_metafile:
        return

    @functools.wraps(init_pipeline)
    def _init_pipeline(self, cfg):  # noqa: ANN001, ANN202  (mmseg's signature)
        as_mmseg_loaders(cfg.test_dataloader.dataset.pipeline)
        return init_pipeline(self, cfg)

    @functools.wraps(load)
    def _load_model_from_metafile(self, model: str):  # noqa: ANN001, ANN202
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
        return Config.fromfile(found[0]), found[1]

    MMSegInferencer._init_pipeline = _init_pipeline
    MMSegInferencer._load_model_from_metafile = _load_model_from_metafile


install()
