"""A config's model built for training, and the synthetic batch."""

from __future__ import annotations

import os

import torch

from hamseg.benchmark.training import build_for_training, resolve, synthetic_batch
from tests.conftest import TINY_FCN


def test_synthetic_batch_is_what_the_loader_yields():
    data = synthetic_batch(2, 33, num_classes=3, seed=1)
    assert len(data["inputs"]) == len(data["data_samples"]) == 2
    for image, sample in zip(data["inputs"], data["data_samples"]):
        assert image.dtype == torch.uint8 and image.shape == (3, 33, 33)
        label = sample.gt_sem_seg.data
        assert label.shape == (1, 33, 33)
        values = set(label.unique().tolist())
        assert values <= {0, 1, 2, 255} and 255 in values
        assert 0.01 < (label == 255).float().mean().item() < 0.1  # 5% ignored
        assert sample.metainfo["pad_shape"] == (33, 33)
    again = synthetic_batch(2, 33, num_classes=3, seed=1)
    assert torch.equal(again["inputs"][1], data["inputs"][1])


SYNC_BN = dict(type="SyncBN", requires_grad=True)
AUX_CONFIG = f"""_base_ = [{TINY_FCN!r}]
model = dict(
    pretrained="open-mmlab://resnet18_v1c",
    backbone=dict(norm_cfg={SYNC_BN!r}),
    auxiliary_head=dict(type="FCNHead", in_channels=64, in_index=0, channels=8, num_convs=1,
                        concat_input=False, num_classes=3, norm_cfg={SYNC_BN!r}),
)
"""


def test_build_for_training_as_a_one_process_run(tmp_path):
    """Pretrained weights off (nothing is downloaded), SyncBN reverted to BN, padding to the
    given size, the config's optimizer, the auxiliary head kept or dropped; one train step runs
    on the synthetic batch."""
    config = tmp_path / "aux.py"
    config.write_text(AUX_CONFIG)
    model, optim_wrapper, cfg = build_for_training(str(config), 21, torch.device("cpu"))
    assert model.training and model.data_preprocessor.size == (21, 21)
    assert model.with_auxiliary_head
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    assert norms and not any(isinstance(m, torch.nn.SyncBatchNorm) for m in norms)
    assert type(optim_wrapper.optimizer).__name__ == cfg.optim_wrapper.optimizer.type == "SGD"
    batch = synthetic_batch(1, 21, model.decode_head.num_classes)
    log_vars = model.train_step(batch, optim_wrapper)
    assert torch.isfinite(log_vars["loss"]) and "aux.loss_ce" in log_vars
    model, _, _ = build_for_training(str(config), 21, torch.device("cpu"), no_aux=True)
    assert not model.with_auxiliary_head


def test_relative_configs_are_in_the_checkout():
    assert resolve("tests/data/tiny_fcn.py") == TINY_FCN == resolve(TINY_FCN)
    mmseg_config = resolve("mmseg::nonlocal_net/nonlocal_r101-d8_4xb4-40k_voc12aug-512x512.py")
    assert os.path.isfile(mmseg_config) and "/.mim/configs/nonlocal_net/" in mmseg_config
