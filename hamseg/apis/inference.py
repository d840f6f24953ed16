"""mmseg's Python API with strict checkpoint loading (docs/ecosystem.md)."""

from __future__ import annotations

import os.path as osp
from typing import Optional

import numpy as np
import torch
from mmengine.config import Config
from mmengine.infer import BaseInferencer
from mmseg.apis import MMSegInferencer
from mmseg.apis import init_model as mmseg_init_model
from torch import nn

from hamseg.compat.checkpoint import load_checkpoint_file
from hamseg.compat.package_lookup import PACKAGE_DIR, config_file
from hamseg.utils.config import dataset_class_metainfo, split_datasets
from hamseg.utils.errors import UsageError, require_file

from .checkpoint import load_state_dict_strict


def init_model(
    config: Optional[str | Config | dict],
    checkpoint: Optional[str] = None,
    device: Optional[str] = None,
    cfg_options: Optional[dict] = None,
) -> nn.Module:
    """mmseg's ``init_model`` loading ``checkpoint`` strictly; ``config`` None: the checkpoint's.
    ``dataset_meta``: the checkpoint's, else the config dataset's if the class count fits."""
    if checkpoint is not None and "://" not in str(checkpoint):
        require_file(str(checkpoint), "checkpoint file")
    loaded = load_checkpoint_file(str(checkpoint)) if checkpoint is not None else None
    meta = loaded.get("meta") or {} if isinstance(loaded, dict) else {}
    if config is None and "cfg" not in meta:
        raise UsageError(f"checkpoint {checkpoint} stores no config: pass --config")
    if config is None:
        config = Config.fromstring(meta["cfg"], file_format=".py")
    elif isinstance(config, dict):  # a ConfigDict too
        config = Config(config)
    elif not isinstance(config, Config):
        config = Config.fromfile(config_file(str(config)))
    device = device or ("cuda:0" if torch.cuda.is_available() else "cpu")
    model = mmseg_init_model(config, None, device, cfg_options)
    if loaded is not None:
        load_state_dict_strict(model, loaded, str(checkpoint))
    old = meta.get("CLASSES") and dict(classes=meta["CLASSES"], palette=meta.get("PALETTE"))
    classes = meta.get("dataset_meta") or old or config_dataset_meta(model.cfg) or {}
    fits = len(classes.get("classes") or ()) == model.decode_head.num_classes
    model.dataset_meta = classes if fits else None
    model.dataset_meta = dict(zip(("classes", "palette"), class_info(model)))
    return model


def config_dataset_meta(cfg: Config) -> Optional[dict]:
    """Classes and palette of the config's test (else val, train) dataset: its ``metainfo``
    over its class's ``METAINFO`` (a subset of the classes keeps their colours)."""
    for _, dataset in split_datasets(cfg, ("test", "val", "train")):
        base, own = dataset_class_metainfo(dataset), dataset.get("metainfo") or {}
        classes = list(own.get("classes") or base.get("classes") or [])
        colours = dict(zip(base.get("classes") or [], base.get("palette") or []))
        palette = own.get("palette") or [colours.get(c) for c in classes]
        if classes:
            return dict(
                classes=classes, palette=None if None in palette else list(map(list, palette))
            )
    return None


def class_info(model: nn.Module) -> tuple[list[str], list[list[int]]]:
    """Class names and palette of a model (``class i`` and a fixed random palette if absent)."""
    meta = getattr(model, "dataset_meta", None) or {}
    n = model.decode_head.num_classes
    classes = list(meta.get("classes") or [f"class {i}" for i in range(n)])
    palette = meta.get("palette")
    if not palette or len(palette) < len(classes):
        palette = np.random.default_rng(42).integers(0, 256, size=(len(classes), 3)).tolist()
    return classes, [list(map(int, c)) for c in palette]


def resolve_model_name(name: str) -> tuple[str, str] | None:
    """(config, weights) of a ``Name`` or ``Alias`` (any case) in hamseg's model index."""
    root = osp.join(PACKAGE_DIR, ".mim")
    for model in BaseInferencer._get_models_from_metafile(root):
        if name.lower() in (n.lower() for n in [model["Name"], *model.get("Alias", [])]):
            return osp.join(root, model["Config"]), model["Weights"]
    return None


class HamSegInferencer(MMSegInferencer):
    """mmseg's ``MMSegInferencer`` built by :func:`init_model`; model names are looked up in
    hamseg's index, then mmseg's; ``model=None`` takes the config stored in ``weights``."""

    def _load_model_from_metafile(self, model: str) -> tuple[Config, Optional[str]]:
        found = (model, None) if model.startswith("hamseg::") else resolve_model_name(model)
        if found is None:
            return super()._load_model_from_metafile(model)
        return Config.fromfile(config_file(found[0])), found[1]

    def _init_model(self, cfg: Config, weights: Optional[str], device: str = "cpu") -> nn.Module:
        model = init_model(cfg or None, weights, device)
        cfg.update({} if cfg else model.cfg._cfg_dict)  # model=None: the checkpoint's config
        return model
