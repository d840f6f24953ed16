"""Inference with a trained checkpoint: build the model from its stored config, segment images.

:func:`init_segmentor` is ``mmseg.apis.init_model`` with two differences: the config defaults to
the one mmengine stored in the checkpoint, and the weights load strictly
(:func:`~hamseg.apis.checkpoint.load_state_dict_strict`), so a checkpoint of another class count
stops with one line instead of predicting with a random classifier. :func:`segment_images` writes
overlays for a list of images and skips, with a report, every file that is not a complete image.
:func:`init_segmentor_from_config` builds the model of a config without any weights, with the
classes and palette of the config's dataset: what runs around an exported network
(``tools/infer.py --backend onnxruntime``), which brings its own weights.
"""

from __future__ import annotations

import os
import os.path as osp
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import cv2
import numpy as np
from mmengine.config import Config
from torch import nn

from hamseg.compat.checkpoint import load_checkpoint_file
from hamseg.compat.package_lookup import config_file
from hamseg.utils.errors import UsageError, require_file

from .checkpoint import load_state_dict_strict
from .images import ImageDecodeError, read_image_rgb
from .overlay import draw_overlay

#: What a config argument may be: a file (``hamseg::`` names too) or a config object.
ConfigLike = Union[str, Path, Config, dict]

__all__ = [
    "InferenceReport",
    "class_info",
    "config_dataset_meta",
    "init_segmentor",
    "init_segmentor_from_config",
    "output_name",
    "predict_label",
    "segment_images",
]


def _dataset_meta(meta: dict, num_classes: int) -> Optional[dict]:
    """Classes and palette from a checkpoint's meta, as ``mmseg.apis.init_model`` reads them;
    without any, those of the mmseg dataset with ``num_classes`` classes (None if there is none)."""
    if "dataset_meta" in meta:
        return meta["dataset_meta"]
    if "CLASSES" in meta:  # mmseg 0.x checkpoints
        return dict(classes=meta["CLASSES"], palette=meta.get("PALETTE"))
    from mmseg.utils import dataset_aliases, get_classes, get_palette

    for name in dataset_aliases:
        if len(get_classes(name)) == num_classes:
            return dict(classes=get_classes(name), palette=get_palette(name))
    return None


def _read_config(config: ConfigLike, cfg_options: Optional[dict]) -> Config:
    """A config object from a path (``hamseg::`` names too) or a config, options merged."""
    if isinstance(config, Path):
        config = str(config)
    if isinstance(config, str):
        config = Config.fromfile(config_file(config))
    elif not isinstance(config, Config):  # a ConfigDict or dict
        config = Config(dict(config))
    if cfg_options:
        config.merge_from_dict(cfg_options)
    return config


def init_segmentor(
    checkpoint: str,
    config: Optional[ConfigLike] = None,
    device: str = "cpu",
    cfg_options: Optional[dict] = None,
) -> nn.Module:
    """Build the segmentor of ``checkpoint`` in eval mode, its weights loaded strictly.

    The one strict path behind hamseg's tools, :func:`hamseg.apis.init_model` and
    :class:`hamseg.apis.HamSegInferencer`.

    Args:
        checkpoint: Checkpoint file or URL (mmengine's format, or a bare state dict).
        config: Config file (``hamseg::`` names too) or config object; default the config stored
            in the checkpoint's ``meta.cfg``.
        device: 'cpu' or 'cuda:N'.
        cfg_options: Options merged into the config (as mmseg's ``init_model``).

    Returns:
        The model, with ``cfg`` set as mmseg's ``init_model`` sets it, and ``dataset_meta``
        (classes, palette) from the checkpoint's meta as mmseg reads it; without any, those of
        an mmseg dataset with the model's class count, else ``class i`` names and a fixed
        palette (:func:`class_info`).

    Raises:
        UsageError: If the checkpoint or config file does not exist, or no config is given and
            the checkpoint stores none.
        CheckpointMismatchError: If the checkpoint does not fit the config's model exactly.
    """
    if "://" not in checkpoint:
        require_file(checkpoint, "checkpoint file")
    loaded = load_checkpoint_file(checkpoint, map_location="cpu")
    meta = loaded.get("meta", {}) if isinstance(loaded, dict) else {}
    if config is not None:
        cfg = _read_config(config, cfg_options)
    elif "cfg" in meta:
        cfg = _read_config(Config.fromstring(meta["cfg"], file_format=".py"), cfg_options)
    else:
        raise UsageError(f"checkpoint {checkpoint} stores no config: pass --config")
    model = _build_model(cfg, device)
    load_state_dict_strict(model, loaded, checkpoint)
    return _with_dataset_meta(model, _dataset_meta(meta, model.decode_head.num_classes))


def _build_model(cfg: Config, device: str) -> nn.Module:
    """mmseg's ``init_model`` without weights: the config's model in eval mode, ``cfg`` set."""
    from mmseg.apis import init_model

    with warnings.catch_warnings():
        # mmseg's loss builders warn about training options; inference never uses the loss.
        warnings.filterwarnings("ignore", message="``build_loss`` would be deprecated")
        warnings.filterwarnings("ignore", message="Default ``avg_non_ignore`` is False")
        return init_model(cfg, None, device=device)


def init_segmentor_from_config(
    config: ConfigLike, device: str = "cpu", cfg_options: Optional[dict] = None
) -> nn.Module:
    """Build the segmentor of ``config`` in eval mode without loading any weights.

    For running an exported network (:func:`hamseg.apis.onnx_backend.use_onnxruntime`): the
    model object gives the test pipeline, the data preprocessor and whole/slide inference; its
    own (initial) weights are never used. No checkpoint or pretrained backbone is read.

    Args:
        config: Config file (``hamseg::`` names too) or config object.
        device: 'cpu' or 'cuda:N'.
        cfg_options: Options merged into the config.

    Returns:
        The model with ``cfg`` set and ``dataset_meta`` from the config's dataset
        (:func:`config_dataset_meta`); without one, ``class i`` names (:func:`class_info`).

    Raises:
        UsageError: If the config file does not exist.
    """
    model = _build_model(_read_config(config, cfg_options), device)
    return _with_dataset_meta(model, config_dataset_meta(model.cfg))


def _with_dataset_meta(model: nn.Module, meta: Optional[dict]) -> nn.Module:
    """Set ``model.dataset_meta`` to ``meta``, or, if None, to ``class i`` names and a generated
    palette (:func:`class_info`); returns ``model``."""
    model.dataset_meta = meta
    if meta is None:
        classes, palette = class_info(model)
        model.dataset_meta = dict(classes=classes, palette=palette)
    return model


def config_dataset_meta(cfg: Config) -> Optional[dict]:
    """Classes and palette of a config's dataset (test, else val, else train), as the dataset
    would set them: its ``metainfo``, else its class's ``METAINFO``; None if it names none.

    ``metainfo`` classes without a palette take the colours of the same names in the class's
    ``METAINFO`` when it has them all (as mmseg's datasets do), else none (a generated palette,
    :func:`class_info`).
    """
    from hamseg.utils.config import (
        dataset_class_metainfo,
        dataset_classes,
        split_datasets,
    )

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
    """Class names and palette of a model (from the checkpoint; a generated palette if absent)."""
    meta = getattr(model, "dataset_meta", None) or {}
    n = model.decode_head.num_classes
    classes = list(meta.get("classes") or [f"class {i}" for i in range(n)])
    palette = meta.get("palette")
    if not palette or len(palette) < len(classes):
        rng = np.random.default_rng(42)
        palette = rng.integers(0, 256, size=(len(classes), 3)).tolist()
    return classes, [list(map(int, c)) for c in palette]


def predict_label(model: nn.Module, rgb: np.ndarray) -> np.ndarray:
    """Predicted class indices (H, W) int64 of an RGB uint8 image (H, W, 3)."""
    from mmseg.apis import inference_model

    # mmseg's pipelines take BGR arrays, like images read by cv2.
    result = inference_model(model, np.ascontiguousarray(rgb[:, :, ::-1]))
    return result.pred_sem_seg.data[0].cpu().numpy().astype(np.int64)


def output_name(path: str, inputs_root: Optional[str]) -> str:
    """Output stem: the path relative to its input folder (separators -> '__'), else the name."""
    rel = osp.relpath(path, inputs_root) if inputs_root else osp.basename(path)
    stem = osp.splitext(rel)[0]
    return stem.replace(os.sep, "__")


@dataclass
class InferenceReport:
    """What :func:`segment_images` did: overlays written, inputs skipped (path, reason)."""

    written: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


def segment_images(
    model: nn.Module,
    paths: Sequence[str],
    out_dir: str,
    inputs_root: Optional[str] = None,
    opacity: float = 0.5,
    legend: str = "present",
    save_label: bool = False,
    progress: bool = True,
    on_failure: Optional[Callable[[str, str], Any]] = None,
) -> InferenceReport:
    """Segment each image and write ``<name>_overlay.png`` (and ``<name>_label.png``).

    Args:
        model: A segmentor from :func:`init_segmentor`.
        paths: Image files.
        out_dir: Output folder (created).
        inputs_root: Folder the paths were found in: output names keep the sub-folders.
        opacity: Weight of the class colours.
        legend: 'present' or 'all' (see :func:`~hamseg.apis.overlay.draw_overlay`).
        save_label: Also write the raw label map (uint8 PNG).
        progress: Show a progress bar (tqdm, on stderr) when there is more than one image.
        on_failure: Called with ``(path, message)`` for each input that is skipped, when it
            happens; the message names the file and the problem.

    Returns:
        The overlays written and the inputs skipped because they are not complete images.
    """
    from tqdm import tqdm

    classes, palette = class_info(model)
    os.makedirs(out_dir, exist_ok=True)
    report = InferenceReport()
    for path in tqdm(paths, desc="infer", unit="img", disable=not progress or len(paths) < 2):
        try:
            img = read_image_rgb(path)
        except ImageDecodeError as err:
            report.failed.append((path, str(err)))
            if on_failure is not None:
                on_failure(path, str(err))
            continue
        label = predict_label(model, img)
        canvas = draw_overlay(img, label, classes, palette, opacity, legend)
        stem = output_name(path, inputs_root)
        out_path = osp.join(out_dir, f"{stem}_overlay.png")
        cv2.imwrite(out_path, cv2.cvtColor(canvas, cv2.COLOR_RGB2BGR))
        if save_label:
            cv2.imwrite(osp.join(out_dir, f"{stem}_label.png"), label.astype(np.uint8))
        report.written.append(out_path)
    return report
