"""mmseg's Python APIs on hamseg's models, with strict checkpoint loading.

``import hamseg`` (done by importing this module) makes mmseg's own ``init_model``,
``inference_model`` and ``MMSegInferencer`` work on an mmcv-lite stack, on hamseg's configs (their
checked loaders) and, for the inferencer, on hamseg's model names
(:mod:`hamseg.compat.mmseg_inferencer`). Those load weights as mmseg does, non-strictly: a
checkpoint of another class count only warns "size mismatch" and predicts with a randomly
initialised classifier. The entry points here load strictly, through the one strict path
:func:`~hamseg.apis.inference.init_segmentor` (:func:`~hamseg.apis.checkpoint.check_state_dict`):

- :func:`init_model`: mmseg's signature and result (``cfg``, ``dataset_meta`` with the classes and
  palette from the checkpoint's meta), but a checkpoint that does not fit stops with one line
  naming the layer, both shapes and, for the classifier, both class counts.
- :class:`HamSegInferencer`: mmseg's ``MMSegInferencer`` with that loading, and hamseg's model
  names looked up before mmseg's (weights by path: nothing is hosted).
- :func:`inference_model`: mmseg's own (it loads nothing).
"""

from __future__ import annotations

import os.path as osp
from pathlib import Path
from typing import Optional, Union

from mmengine.config import Config, ConfigDict
from mmseg.apis import MMSegInferencer, inference_model
from mmseg.apis import init_model as mmseg_init_model
from torch import nn

from hamseg.compat.mmseg_inferencer import resolve_model_name

from .inference import init_segmentor

__all__ = ["HamSegInferencer", "inference_model", "init_model", "resolve_model_name"]


def init_model(
    config: Union[str, Path, Config],
    checkpoint: Optional[str] = None,
    device: str = "cuda:0",
    cfg_options: Optional[dict] = None,
) -> nn.Module:
    """``mmseg.apis.init_model`` with the checkpoint loaded strictly.

    Args:
        config: Config file (``hamseg::`` names too) or config object.
        checkpoint: Checkpoint file or URL; None builds the model without weights (mmseg's
            behaviour).
        device: As in mmseg (default 'cuda:0'; pass 'cpu' on a machine without GPU).
        cfg_options: Options merged into the config.

    Returns:
        The segmentor in eval mode with ``cfg`` and ``dataset_meta`` (classes and palette from
        the checkpoint's meta) set, as mmseg's ``init_model`` returns it.

    Raises:
        CheckpointMismatchError: The checkpoint does not fit the config's model exactly: one
            line naming the layer, both shapes and, for the classifier, "the checkpoint has N
            classes, the config has M".
        UsageError: A missing config or checkpoint file.
    """
    if checkpoint is None:
        return mmseg_init_model(config, None, device, cfg_options)
    return init_segmentor(str(checkpoint), config, device, cfg_options)


class HamSegInferencer(MMSegInferencer):
    """mmseg's ``MMSegInferencer`` with strict weights and hamseg's model names first.

    Plain ``MMSegInferencer`` (after ``import hamseg``) also runs hamseg's configs and resolves
    hamseg's model names, but loads weights as mmseg does (non-strictly). This one builds the
    model with :func:`~hamseg.apis.inference.init_segmentor`: a checkpoint that does not fit the
    config stops with one line; classes and palette come from the checkpoint's meta.

    Args:
        model: A config path (``hamseg::`` names too), a config, a hamseg model name or alias
            (``ham_voc``, ``hamhead-nmf_r18-d8_context-shapes``, ...; looked up in hamseg's
            index first, then mmseg's), or None to take the config stored in ``weights``.
        weights: Checkpoint path or URL; for a model name, default the index's ``Weights``.
        **kwargs: ``MMSegInferencer``'s (``classes``, ``palette``, ``device``, ...).

    Raises:
        UsageError: A local weights file that does not exist (for a hamseg name without
            ``weights``: the index's path, where training writes the checkpoint).
        CheckpointMismatchError: The weights do not fit the config's model exactly.
    """

    def _load_model_from_metafile(self, model: str) -> tuple[Config, str]:
        """Config and weights of a model name: hamseg's index first, then mmseg's."""
        found = resolve_model_name(model)
        if found is None:
            return super()._load_model_from_metafile(model)
        config, weights = found
        return Config.fromfile(config), weights

    def _init_model(
        self, cfg: Union[Config, ConfigDict], weights: Optional[str], device: str = "cpu"
    ) -> nn.Module:
        """The model, built and loaded strictly by ``init_segmentor`` (without weights, mmseg's
        random init and warnings)."""
        if weights is None:
            return super()._init_model(cfg, weights, device)
        if "://" not in weights and not osp.isfile(weights):
            raise FileNotFoundError(
                f"weights not found: {weights} (nothing is hosted: pass weights=PATH of a "
                "checkpoint, e.g. one written by tools/train.py)"
            )
        model = init_segmentor(weights, cfg or None, device)
        if not cfg:  # model=None: the checkpoint's config, for the pipeline and visualizer
            cfg.update(model.cfg._cfg_dict)
        meta = model.dataset_meta
        # Only these two, as mmseg's inferencer keeps them (its visualizer takes no others).
        model.dataset_meta = dict(classes=meta.get("classes"), palette=meta.get("palette"))
        return model
