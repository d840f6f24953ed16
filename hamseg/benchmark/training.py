"""A config's model, optimizer and one synthetic batch, as tools/train.py builds them.

:func:`build_for_training` builds the model for one process as a training run does: the
pretrained weights off (``pretrained`` and the backbone's ``init_cfg`` None, then the model's
own ``init_weights``), SyncBN reverted to BN as mmengine does without a process group, the
data preprocessor's pad size set to the input size, the config's own optimizer and parameter
groups. :func:`synthetic_batch` is what the data loader yields after ``PackSegInputs``.
"""

from __future__ import annotations

import copy
import os.path as osp
from typing import Any

import torch
from mmengine.config import Config
from mmengine.model import revert_sync_batchnorm
from mmengine.optim import OptimWrapper, build_optim_wrapper
from mmengine.registry import init_default_scope
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample

from hamseg.compat.package_lookup import config_file

#: The checkout hamseg runs from: relative config paths are resolved against it.
REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def resolve(config: str) -> str:
    """Path of a config; a packaged name (``mmseg::x``, ``hamseg::x``) is that package's config
    (:func:`~hamseg.compat.package_lookup.config_file`), a relative path is relative to the
    checkout."""
    if "::" in config:
        return config_file(config)
    return config if osp.isabs(config) else osp.join(REPO, config)


def build_for_training(
    config: str, size: int, device: torch.device, no_aux: bool = False
) -> tuple[Any, OptimWrapper, Config]:
    """The model (train mode, on ``device``), optim wrapper and config of a config file.

    Args:
        config: Path of the config file.
        size: Square input size; the data preprocessor pads to it (if it pads to a size).
        device: Where the model runs.
        no_aux: Drop the auxiliary head(s) of the config.
    """
    cfg = Config.fromfile(config)
    init_default_scope(cfg.get("default_scope", "mmseg"))
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.pretrained = None
    model_cfg.backbone.init_cfg = None
    if model_cfg.data_preprocessor.get("size"):  # else a smaller size is padded to the crop
        model_cfg.data_preprocessor.size = (size, size)
    if no_aux:
        model_cfg.pop("auxiliary_head", None)
    torch.manual_seed(0)
    model = revert_sync_batchnorm(MODELS.build(model_cfg))
    model.init_weights()
    model = model.to(device)
    model.train()
    return model, build_optim_wrapper(model, cfg.optim_wrapper), cfg


def synthetic_batch(batch: int, size: int, num_classes: int, seed: int = 0) -> dict:
    """What the data loader yields after PackSegInputs: uint8 BGR images, labels with 5% 255s."""
    gen = torch.Generator().manual_seed(seed)
    inputs, samples = [], []
    for _ in range(batch):
        inputs.append(torch.randint(0, 256, (3, size, size), dtype=torch.uint8, generator=gen))
        label = torch.randint(0, num_classes, (1, size, size), generator=gen)
        label[torch.rand(label.shape, generator=gen) < 0.05] = 255
        meta = dict(img_shape=(size, size), ori_shape=(size, size), pad_shape=(size, size))
        samples.append(SegDataSample(gt_sem_seg=PixelData(data=label), metainfo=meta))
    return dict(inputs=inputs, data_samples=samples)
