"""Tests of HamHead: registry, forward/backward, official checkpoint names, training with Runner."""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import ast
from pathlib import Path

import mmseg.models  # noqa: F401
import pytest
import torch
from mmengine.config import ConfigDict
from mmengine.hooks import Hook
from mmengine.registry import DefaultScope
from mmengine.runner import Runner
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample
from torch.utils.data import Dataset

from hamseg.models import CD, NMF, VQ, Hamburger, HamHead

OFFICIAL = Path("/work/shared/reference/official-hamnet-r101-v2-nmf-state-dict.txt")
BN = dict(type="BN", requires_grad=True)


def test_registry_names():
    for name, cls in [("NMF", NMF), ("CD", CD), ("VQ", VQ), ("Hamburger", Hamburger)]:
        assert MODELS.get(name) is cls
    assert MODELS.get("HamHead") is HamHead
    assert MODELS.get("LightHamHead") is not HamHead  # mmseg's SegNeXt head is untouched


def sample(h, w, label):
    data_sample = SegDataSample()
    data_sample.gt_sem_seg = PixelData(data=label[None])
    data_sample.set_metainfo(dict(img_shape=(h, w), ori_shape=(h, w)))
    return data_sample


def test_forward_backward_on_resnet_features():
    head = MODELS.build(
        dict(
            type="HamHead",
            in_channels=2048,
            channels=32,
            ham_channels=64,
            ham_cfg=dict(type="NMF", S=1, R=8, train_steps=6, eval_steps=6),
            num_classes=19,
            norm_cfg=BN,
        )
    )
    feat = torch.randn(1, 2048, 15, 17, requires_grad=True)
    out = head([feat])
    assert out.shape == (1, 19, 15, 17)
    out.square().mean().backward()
    for param in (
        head.squeeze.conv.weight,
        head.hamburger.lower_bread[0].weight,
        head.hamburger.cheese.conv.weight,
        head.align.conv.weight,
        head.conv_seg.weight,
    ):
        assert param.grad is not None and param.grad.abs().sum() > 0
    assert feat.grad.abs().sum() > 0
    # mmseg's training entry point: loss from logits and data samples.
    labels = torch.randint(0, 19, (60, 68))
    losses = head.loss([feat.detach()], [sample(60, 68, labels)], train_cfg=dict())
    assert torch.isfinite(losses["loss_ce"])


def test_all_options_reach_the_ham_from_config():
    head = MODELS.build(
        dict(
            type="HamHead",
            in_channels=16,
            channels=8,
            num_classes=3,
            ham_channels=32,
            ham_cfg=dict(
                type="CD",
                S=2,
                R=5,
                train_steps=3,
                eval_steps=4,
                inv_t=10,
                beta=0.05,
                eta=0.5,
                init="online",
                grad="bptt",
                eval_seed=7,
            ),
            variant="paper",
            norm_cfg=BN,
        )
    )
    ham = head.hamburger.ham
    assert isinstance(ham, CD) and head.hamburger.variant == "paper"
    got = (ham.S, ham.D, ham.R, ham.train_steps, ham.eval_steps, ham.inv_t, ham.beta, ham.eta)
    assert got == (2, 16, 5, 3, 4, 10.0, 0.05, 0.5)
    assert (ham.init, ham.grad, ham.eval_seed) == ("online", "bptt", 7)
    assert len(head.hamburger.lower_bread) == 1  # no ReLU for CD
    assert head.dropout.p == 0.1


def test_seeded_head_evaluates_deterministically():
    head = HamHead(
        in_channels=16,
        channels=8,
        num_classes=3,
        ham_channels=16,
        ham_cfg=dict(type="NMF", R=4, eval_seed=0),
        norm_cfg=BN,
    ).eval()
    feat = torch.rand(2, 16, 9, 11)
    assert torch.equal(head([feat]), head([feat]))


def official_head_entries():
    entries = {}
    for line in OFFICIAL.read_text().splitlines():
        name, rest = line.split(" ", 1)
        if name.startswith("backbone."):
            continue
        shape = ast.literal_eval(rest.rsplit(" ", 1)[0])
        entries[name.replace("fc.1.", "conv_seg.", 1)] = tuple(shape)
    return entries


def test_state_dict_matches_the_official_checkpoint():
    official = official_head_entries()
    assert len(official) == 23
    head = HamHead(in_channels=2048, channels=256, num_classes=21, ham_channels=512, norm_cfg=BN)
    ours = {k: tuple(v.shape) for k, v in head.state_dict().items()}
    assert ours == official
    # And the official tensors load strictly.
    fake = {
        k: torch.zeros(s, dtype=torch.long if k.endswith("tracked") else torch.float)
        for k, s in official.items()
    }
    head.load_state_dict(fake, strict=True)


class TinySegDataset(Dataset):
    """Four random 33x35 images whose label is "red channel > 127"."""

    def __init__(self, n=4, size=(33, 35)):
        g = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (n, 3, *size), generator=g, dtype=torch.uint8)
        self.size = size

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        img = self.images[i]
        return dict(inputs=img, data_samples=sample(*self.size, (img[2] > 127).long()))


class LossRecorder(Hook):
    def __init__(self):
        self.losses = []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.losses.append(outputs["loss"].item())


def build_tiny_segmentor(size):
    return MODELS.build(
        dict(
            type="EncoderDecoder",
            data_preprocessor=dict(
                type="SegDataPreProcessor",
                mean=[123.675, 116.28, 103.53],
                std=[58.395, 57.12, 57.375],
                bgr_to_rgb=True,
                size=size,
            ),
            backbone=dict(
                type="ResNetV1c",
                depth=18,
                stem_channels=16,
                base_channels=16,
                out_indices=(3,),
                norm_cfg=BN,
            ),
            decode_head=dict(
                type="HamHead",
                in_channels=128,
                in_index=0,
                channels=16,
                ham_channels=32,
                ham_cfg=dict(type="NMF", R=4, eval_seed=0),
                num_classes=2,
                norm_cfg=BN,
            ),
            train_cfg=dict(),
            test_cfg=ConfigDict(mode="whole"),
        )
    )


def test_encoder_decoder_trains_with_runner(tmp_path):
    size = (33, 35)
    with DefaultScope.overwrite_default_scope("mmseg"):  # the data preprocessor is mmseg's
        model = build_tiny_segmentor(size)
    recorder = LossRecorder()
    runner = Runner(
        model=model,
        work_dir=str(tmp_path),
        train_dataloader=dict(
            dataset=TinySegDataset(size=size),
            sampler=dict(type="InfiniteSampler", shuffle=True),
            batch_size=2,
            num_workers=0,
            collate_fn=dict(type="pseudo_collate"),
        ),
        train_cfg=dict(type="IterBasedTrainLoop", max_iters=4),
        optim_wrapper=dict(type="OptimWrapper", optimizer=dict(type="SGD", lr=0.01, momentum=0.9)),
        default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=4, by_epoch=False)),
        custom_hooks=[recorder],
        randomness=dict(seed=0),
        default_scope="mmseg",
        log_level="WARNING",
    )
    before = model.decode_head.hamburger.lower_bread[0].weight.detach().clone()
    runner.train()
    assert len(recorder.losses) == 4 and all(
        map(torch.isfinite, map(torch.tensor, recorder.losses))
    )
    assert not torch.equal(model.decode_head.hamburger.lower_bread[0].weight, before)
    assert (tmp_path / "iter_4.pth").exists()

    model.eval()
    batch = [TinySegDataset(size=size)[0]]
    with torch.no_grad():
        preds = model.test_step(
            dict(
                inputs=[b["inputs"] for b in batch], data_samples=[b["data_samples"] for b in batch]
            )
        )
        again = model.test_step(
            dict(
                inputs=[b["inputs"] for b in batch], data_samples=[b["data_samples"] for b in batch]
            )
        )
    assert preds[0].pred_sem_seg.data.shape == (1, *size)
    assert torch.equal(preds[0].seg_logits.data, again[0].seg_logits.data)


@pytest.mark.parametrize("variant", ["paper", "release"])
def test_paper_and_release_heads_build(variant):
    head = HamHead(
        in_channels=8, channels=4, num_classes=2, ham_channels=8, variant=variant, norm_cfg=BN
    )
    head.init_weights()  # mmengine's init keeps the Hamburger's own initialisation path
    assert head([torch.rand(1, 8, 3, 5)]).shape == (1, 2, 3, 5)


def test_hamburger_follows_the_head_norm_and_act():
    head = HamHead(in_channels=8, channels=4, num_classes=2, ham_channels=8, norm_cfg=None)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in head.modules())
    assert head.hamburger.cheese.conv.bias is not None  # no norm: the conv keeps its bias
    head = HamHead(
        in_channels=8,
        channels=4,
        num_classes=2,
        ham_channels=8,
        norm_cfg=dict(type="GN", num_groups=2),
        act_cfg=dict(type="LeakyReLU", negative_slope=0.1),
    )
    assert isinstance(head.hamburger.cheese.gn, torch.nn.GroupNorm)
    assert isinstance(head.hamburger.act, torch.nn.LeakyReLU)
