"""mmseg's Python API with strict loading: :func:`init_model` (mmseg's signature; the config
defaults to the checkpoint's, the weights load strictly) is hamseg's one loader, and
:class:`HamSegInferencer` mmseg's ``MMSegInferencer`` built by it."""

from __future__ import annotations

import os.path as osp
import warnings
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch
from mmengine.config import Config, ConfigDict
from mmengine.dataset import Compose
from mmengine.infer import BaseInferencer
from mmseg.apis import MMSegInferencer, inference_model
from mmseg.apis import init_model as mmseg_init_model
from torch import nn

from hamseg.compat.checkpoint import load_checkpoint_file
from hamseg.compat.package_lookup import PACKAGE_DIR, config_file
from hamseg.utils.config import dataset_class_metainfo, dataset_classes, split_datasets
from hamseg.utils.errors import UsageError, require_file

from .checkpoint import load_state_dict_strict

#: What a config argument may be: a file (``hamseg::`` names too) or a config object.
ConfigLike = Union[str, Path, Config, dict]
ConfigType = Union[Config, ConfigDict]


def _read_config(config: ConfigLike, cfg_options: Optional[dict]) -> Config:
    """A config object of a file (``hamseg::`` names too) or config, options merged."""
    if isinstance(config, (str, Path)):
        config = Config.fromfile(config_file(str(config)))
    elif not isinstance(config, Config):  # a ConfigDict or dict
        config = Config(dict(config))
    if cfg_options:
        config.merge_from_dict(cfg_options)
    return config


def init_model(
    config: Optional[ConfigLike],
    checkpoint: Optional[str] = None,
    device: Optional[str] = None,
    cfg_options: Optional[dict] = None,
) -> nn.Module:
    """Build the segmentor of ``config`` in eval mode and load ``checkpoint`` strictly.

    Args:
        config: Config file (``hamseg::`` names too) or object; None: the checkpoint's own.
        checkpoint: Checkpoint file or URL; None: no weights (e.g. for an exported network,
            :func:`~hamseg.apis.export.use_onnxruntime`).
        device: 'cpu' or 'cuda:N'; default 'cuda:0' if CUDA is available, else 'cpu'.
        cfg_options: Options merged into the config.

    Returns:
        The model with ``cfg`` and ``dataset_meta``: the checkpoint's classes and palette, else
        the config dataset's (:func:`config_dataset_meta`), else ``class i`` (:func:`class_info`).

    Raises:
        FileNotFoundError: A missing checkpoint or config file.
        UsageError: No config, and no checkpoint that stores one.
        CheckpointMismatchError: The checkpoint does not fit the model exactly.
    """
    device = device or ("cuda:0" if torch.cuda.is_available() else "cpu")
    loaded = None
    meta = {}
    if checkpoint is not None:
        if "://" not in str(checkpoint):
            require_file(str(checkpoint), "checkpoint file")
        loaded = load_checkpoint_file(str(checkpoint))
        meta = loaded.get("meta", {}) if isinstance(loaded, dict) else {}
    if config is None:
        if "cfg" not in meta:
            raise UsageError(f"checkpoint {checkpoint} stores no config: pass --config")
        config = Config.fromstring(meta["cfg"], file_format=".py")
    model = _build(_read_config(config, cfg_options), device)
    if loaded is None:
        classes = config_dataset_meta(model.cfg)
    else:
        load_state_dict_strict(model, loaded, str(checkpoint))
        classes = _checkpoint_dataset_meta(meta, model.decode_head.num_classes)
    model.dataset_meta = classes or dict(zip(("classes", "palette"), class_info(model)))
    return model


def _build(cfg: Config, device: str) -> nn.Module:
    """mmseg's ``init_model`` without weights: the model in eval mode on ``device``, ``cfg``."""
    with warnings.catch_warnings():  # mmseg's loss builders warn about training options
        warnings.filterwarnings("ignore", message="``build_loss`` would be deprecated")
        warnings.filterwarnings("ignore", message="Default ``avg_non_ignore`` is False")
        return mmseg_init_model(cfg, None, device=device)


def _checkpoint_dataset_meta(meta: dict, num_classes: int) -> Optional[dict]:
    """Classes and palette of a checkpoint's meta as ``mmseg.apis.init_model`` reads them."""
    if "dataset_meta" in meta:
        return meta["dataset_meta"]
    if "CLASSES" in meta:  # mmseg 0.x checkpoints
        return dict(classes=meta["CLASSES"], palette=meta.get("PALETTE"))
    from mmseg.utils import dataset_aliases, get_classes, get_palette

    for name in dataset_aliases:
        if len(get_classes(name)) == num_classes:
            return dict(classes=get_classes(name), palette=get_palette(name))
    return None


def config_dataset_meta(cfg: Config) -> Optional[dict]:
    """Classes and palette of a config's dataset (test, else val, else train) as the dataset
    sets them (its ``metainfo``, else its class's ``METAINFO``); None if none."""
    for _, dataset in split_datasets(cfg, ("test", "val", "train")):
        classes = dataset_classes(dataset)
        if not classes:
            continue
        own = dataset.get("metainfo") or {}
        base = dataset_class_metainfo(dataset)
        palette = own.get("palette") or (None if own.get("classes") else base.get("palette"))
        known = list(base.get("classes") or [])
        if not palette and base.get("palette") and all(c in known for c in classes):
            palette = [base["palette"][known.index(c)] for c in classes]
        return dict(classes=list(classes), palette=[list(c) for c in palette] if palette else None)
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


def predict_label(model: nn.Module, rgb: np.ndarray) -> np.ndarray:
    """Predicted class indices (H, W) int64 of an RGB uint8 image (H, W, 3)."""
    result = inference_model(model, np.ascontiguousarray(rgb[:, :, ::-1]))  # mmseg takes BGR
    return result.pred_sem_seg.data[0].cpu().numpy().astype(np.int64)


#: hamseg's checked loaders -> the mmseg transforms they extend (same arguments otherwise).
CHECKED_LOADERS = {
    "CheckedLoadImageFromFile": "LoadImageFromFile",
    "CheckedLoadAnnotations": "LoadAnnotations",
}


def resolve_model_name(name: str) -> tuple[str, str] | None:
    """(config path, weights path) of a ``Name`` or ``Alias`` (any case) of hamseg's model
    index, e.g. ``'ham_voc'``; None if it has no such name. Weights are local paths."""
    root = osp.join(PACKAGE_DIR, ".mim")
    wanted = name.lower()
    for model in BaseInferencer._get_models_from_metafile(root):
        if wanted in (model["Name"].lower(), *(a.lower() for a in model.get("Alias", []))):
            weights = model.get("Weights", "")
            weights = weights[0] if isinstance(weights, list) else weights
            return osp.join(root, model["Config"]), weights
    return None


class HamSegInferencer(MMSegInferencer):
    """mmseg's ``MMSegInferencer`` for hamseg: built by :func:`init_model` (strict loading),
    hamseg's configs (their checked loaders) and model names (``ham_voc``, ``hamseg::`` paths)
    as well as mmseg's; ``model=None`` takes the config stored in ``weights``.

    Raises:
        FileNotFoundError: A local weights file that does not exist (nothing is hosted).
        CheckpointMismatchError: The weights do not fit the config's model exactly.
    """

    def _load_model_from_metafile(self, model: str) -> tuple[Config, Optional[str]]:
        """A ``hamseg::`` config (no weights), a name of hamseg's model index, else mmseg's."""
        if model.startswith("hamseg::"):
            return Config.fromfile(model), None
        found = resolve_model_name(model)
        if found is not None:
            return Config.fromfile(found[0]), found[1]
        return super()._load_model_from_metafile(model)

    def _init_pipeline(self, cfg: ConfigType) -> Compose:
        """mmseg's pipeline, which finds the loaders by mmseg's type names: hamseg's checked
        loaders get those names first (same arguments)."""
        for transform in cfg.test_dataloader.dataset.pipeline:
            transform["type"] = CHECKED_LOADERS.get(transform["type"], transform["type"])
        return super()._init_pipeline(cfg)

    def _init_model(
        self, cfg: Union[Config, ConfigDict], weights: Optional[str], device: str = "cpu"
    ) -> nn.Module:
        if weights is not None and "://" not in weights and not osp.isfile(weights):
            raise FileNotFoundError(
                f"weights not found: {weights} (nothing is hosted: pass weights=PATH of a "
                "checkpoint, e.g. one written by tools/train.py)"
            )
        model = init_model(cfg or None, weights, device)
        if not cfg:  # model=None: the checkpoint's config, for the pipeline and visualizer
            cfg.update(model.cfg._cfg_dict)
        meta = model.dataset_meta  # only these two, as mmseg's inferencer keeps them
        model.dataset_meta = dict(classes=meta.get("classes"), palette=meta.get("palette"))
        return model
