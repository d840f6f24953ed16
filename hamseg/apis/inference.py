"""mmseg's Python API with strict checkpoint loading (docs/ecosystem.md), and images in, overlays
out for ``tools/infer.py`` (an input that is not a complete image is skipped in one line)."""

import os
import os.path as osp
from collections.abc import Iterator, Sequence
from typing import Optional

import cv2
import numpy as np
import torch
from mmengine.config import Config
from mmengine.infer import BaseInferencer
from mmseg.apis import MMSegInferencer, inference_model
from mmseg.apis import init_model as mmseg_init_model
from mmseg.visualization import SegLocalVisualizer
from torch import nn

from hamseg.compat.checkpoint import load_checkpoint_file
from hamseg.compat.package_lookup import PACKAGE_DIR, config_file
from hamseg.datasets.checks import InvalidSampleError, read_image
from hamseg.utils.config import dataset_class_metainfo, split_datasets
from hamseg.utils.errors import UsageError, require_file

from .checkpoint import check_checkpoint


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
    elif not isinstance(config, Config):  # a dict, a file or a packaged name
        config = Config(config) if isinstance(config, dict) else config_file(config)
    device = device or ("cuda:0" if torch.cuda.is_available() else "cpu")
    model = mmseg_init_model(config, None, device, cfg_options)
    if loaded is not None:
        model.load_state_dict(check_checkpoint(model, loaded, str(checkpoint)))
    old = meta.get("CLASSES") and dict(classes=meta["CLASSES"], palette=meta.get("PALETTE"))
    model.dataset_meta = meta.get("dataset_meta") or old or config_dataset_meta(model.cfg)
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
    """Class names and palette of a model's ``dataset_meta`` if they are as many as its classes
    (else ``class i``), a fixed random palette if there is none."""
    meta, n = getattr(model, "dataset_meta", None) or {}, model.decode_head.num_classes
    if len(meta.get("classes") or ()) != n:
        meta = dict(classes=[f"class {i}" for i in range(n)])
    palette = meta.get("palette")
    if not palette or len(palette) < n:
        palette = np.random.default_rng(42).integers(0, 256, size=(n, 3)).tolist()
    return list(meta["classes"]), [list(map(int, c)) for c in palette]


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


IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm")


def gather_inputs(inputs: Sequence[str]) -> list[str]:
    """Image paths of files and folders (recursive, sorted), each file once."""
    unique = {}  # real path -> the first mention
    for item in inputs:
        if not osp.exists(item):
            raise FileNotFoundError(f"input not found: {item}")
        found = [osp.join(root, f) for root, _, files in os.walk(item) for f in files]
        found = sorted(f for f in found if f.lower().endswith(IMAGE_EXTENSIONS))
        for path in found if osp.isdir(item) else [item]:
            unique.setdefault(osp.realpath(path), path)
    return list(unique.values())


def segment_images(
    model: nn.Module,
    paths: Sequence[str],
    out_dir: str,
    inputs_root: Optional[str] = None,
    opacity: float = 0.5,
    with_labels: bool = False,
    save_label: bool = False,
) -> Iterator[tuple[str, Optional[str]]]:
    """Write ``<out_dir>/<name>_overlay.png`` (and ``_label.png``) per image, ``<name>`` its path
    below ``inputs_root`` with '/' as '__'; yield (path, None) or (path, why it was skipped)."""
    drawer = SegLocalVisualizer(name=f"hamseg.images.{id(model)}", alpha=opacity)
    drawer.dataset_meta = dict(zip(("classes", "palette"), class_info(model)))
    os.makedirs(out_dir, exist_ok=True)
    for path in paths:
        try:
            bgr = read_image(path)  # as mmseg's LoadImageFromFile reads it
        except InvalidSampleError as err:
            yield path, str(err)
            continue
        result = inference_model(model, bgr)
        name = osp.relpath(path, inputs_root) if inputs_root else osp.basename(path)
        stem = osp.join(out_dir, osp.splitext(name)[0].replace(os.sep, "__"))
        overlay, label = f"{stem}_overlay.png", result.pred_sem_seg.data[0].cpu().numpy()
        drawer.add_datasample(
            stem, bgr[:, :, ::-1], result, False, out_file=overlay, with_labels=with_labels
        )
        if save_label:
            cv2.imwrite(f"{stem}_label.png", label.astype(np.uint8))
        yield path, None
