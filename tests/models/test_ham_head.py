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
from hamseg.utils.errors import UsageError
from tests.helpers import one_thread  # noqa: F401  (fixture)

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


def test_default_head_evaluates_with_the_papers_protocol():
    """HamHead without ham_cfg: NMF r=64 evaluated as the paper (docs/evaluation.md): a new
    dictionary at every forward, the same logits again for the same global seed; the ensemble
    (eval_seed=0, eval_draws=12) gives one set of logits at every forward, not one draw's."""
    kwargs = dict(in_channels=16, channels=8, num_classes=3, ham_channels=16, norm_cfg=BN)
    head = HamHead(**kwargs).eval()
    ham = head.hamburger.ham
    assert (type(ham).__name__, ham.R, ham.eval_seed, ham.eval_draws) == ("NMF", 64, None, 1)
    feat = torch.rand(2, 16, 9, 11)
    with torch.no_grad():
        torch.manual_seed(3)
        out = head([feat])
        assert not torch.equal(out, head([feat]))
        torch.manual_seed(3)
        assert torch.equal(out, head([feat]))
        ham.eval_seed, ham.eval_draws = 0, 12
        ensemble = head([feat])
        assert torch.equal(ensemble, head([feat])) and not torch.allclose(ensemble, out)


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


def build_tiny_segmentor(size, ham_cfg=None, conv_init="mmseg"):
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
                ham_cfg=ham_cfg or dict(type="NMF", R=4, eval_seed=0),
                num_classes=2,
                norm_cfg=BN,
                conv_init=conv_init,
            ),
            train_cfg=dict(),
            test_cfg=ConfigDict(mode="whole"),
        )
    )


@pytest.mark.slow
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


def release_like_convs():
    """The release's squeeze, align and classifier: plain nn.Conv2d, PyTorch's default init."""
    return [
        torch.nn.Conv2d(2048, 512, 3, padding=1, bias=False),
        torch.nn.Conv2d(512, 256, 3, padding=1, bias=False),
        torch.nn.Conv2d(256, 21, 1),
    ]


def full_size_head(conv_init):
    return HamHead(
        in_channels=2048,
        channels=256,
        num_classes=21,
        ham_channels=512,
        conv_init=conv_init,
        norm_cfg=BN,
    )


def test_pytorch_conv_init_is_the_release_init_after_init_weights():
    """conv_init='pytorch': after mmengine's init_weights (ConvModule's Kaiming, mmseg's
    Normal(0.01) on conv_seg) the three convs have PyTorch's default init, U(-b, b) with
    b = 1/sqrt(fan_in) (std b/sqrt(3): squeeze 0.0043, align 0.0085, classifier 0.0361)."""
    torch.manual_seed(0)
    head = full_size_head("pytorch")
    head.init_weights()
    ours = [head.squeeze.conv, head.align.conv, head.conv_seg]
    for conv, ref, tol in zip(ours, release_like_convs(), (0.002, 0.004, 0.04)):
        assert conv.weight.shape == ref.weight.shape
        assert (conv.bias is None) == (ref.bias is None)
        fan_in = ref.weight[0].numel()
        bound = 1 / fan_in**0.5
        std, ref_std = conv.weight.std().item(), ref.weight.std().item()
        assert abs(std / ref_std - 1) < tol and abs(std * 3**0.5 / bound - 1) < tol
        assert conv.weight.abs().max() <= bound and conv.weight.abs().max() > 0.99 * bound
        if conv.bias is not None:
            assert conv.bias.abs().max() <= bound and conv.bias.std() > 0.5 * bound / 3**0.5
    # the norms: weight 1, bias 0 in both
    for norm in (head.squeeze.bn, head.align.bn):
        assert torch.equal(norm.weight, torch.ones_like(norm.weight))
        assert torch.equal(norm.bias, torch.zeros_like(norm.bias))


def test_mmseg_conv_init_is_unchanged_and_the_hamburger_keeps_its_init():
    """Default conv_init='mmseg': Kaiming normal (fan_out) on squeeze and align, Normal(0.01) on
    the classifier (measured std 0.0208, 0.0295, 0.0100). The Hamburger keeps the release's
    N(0, sqrt(2 / out_channels)) convs and unit norms with either option."""
    for conv_init in ("mmseg", "pytorch"):
        torch.manual_seed(0)
        head = full_size_head(conv_init)
        head.init_weights()
        ham = head.hamburger
        for conv in (ham.lower_bread[0], ham.cheese.conv, ham.upper_bread):
            std = (2 / conv.out_channels) ** 0.5
            assert abs(conv.weight.std().item() / std - 1) < 0.01
        assert torch.equal(ham.cheese.bn.weight, torch.ones(512))
        assert torch.equal(ham.cheese.bn.bias, torch.zeros(512))
        if conv_init == "mmseg":
            stds = [(2 / (512 * 9)) ** 0.5, (2 / (256 * 9)) ** 0.5, 0.01]
            for conv, std in zip((head.squeeze.conv, head.align.conv, head.conv_seg), stds):
                assert abs(conv.weight.std().item() / std - 1) < 0.05


def test_pytorch_conv_init_survives_the_segmentor_init_weights():
    """The Runner calls the EncoderDecoder's init_weights, which reaches the head's."""
    with DefaultScope.overwrite_default_scope("mmseg"):
        model = build_tiny_segmentor((33, 35), conv_init="pytorch")
    model.init_weights()
    head = model.decode_head
    # fan_in 128*9, 32*9, 16: PyTorch's bound b; Kaiming normal / Normal(0.01) would give std
    # 0.083, 0.059, 0.010 instead of b/sqrt(3) = 0.017, 0.034, 0.144.
    for conv in (head.squeeze.conv, head.align.conv, head.conv_seg):
        bound = 1 / conv.weight[0].numel() ** 0.5
        assert conv.weight.abs().max() <= bound
        assert abs(conv.weight.std().item() * 3**0.5 / bound - 1) < 0.25


def test_unknown_conv_init():
    with pytest.raises(ValueError, match="conv_init"):
        HamHead(in_channels=8, channels=4, num_classes=2, ham_channels=8, conv_init="xavier")


def test_head_without_hamburger_is_squeeze_align_classifier():
    """Table 2's baseline: no Hamburger at all."""
    kwargs = dict(in_channels=8, channels=4, num_classes=3, ham_channels=6, norm_cfg=BN)
    head = HamHead(with_hamburger=False, **kwargs).eval()
    assert not any(isinstance(m, Hamburger) for m in head.modules())
    feat = torch.rand(2, 8, 5, 7)
    with torch.no_grad():
        expected = head.conv_seg(head.align(head.squeeze(feat)))
        torch.testing.assert_close(head([feat]), expected)
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n(head) == (8 * 6 * 9 + 2 * 6) + (6 * 4 * 9 + 2 * 4) + (4 * 3 + 3)
    assert n(HamHead(**kwargs)) - n(head) == (6 * 6 + 6) + (6 * 6 + 2 * 6) + 6 * 6  # release


def test_head_switches_reach_the_hamburger():
    head = HamHead(
        in_channels=8,
        channels=4,
        num_classes=2,
        ham_channels=8,
        variant="paper",
        with_ham=False,
        with_upper_bread=False,
        norm_cfg=BN,
    )
    ham = head.hamburger
    assert ham.ham is None and isinstance(ham.upper_bread, torch.nn.Identity)
    assert isinstance(ham.norm, torch.nn.BatchNorm2d) and len(ham.lower_bread) == 2


@pytest.mark.parametrize("swapped", [dict(ham_kwargs=dict(MD_R=16)), dict()])
def test_hamhead_in_a_segnext_config_says_to_use_hamlighthead(swapped):
    """mmseg's SegNeXt decode_head with type='HamHead': one line naming the head to use."""
    head = dict(type="HamHead", in_channels=[8, 16, 24], channels=8, ham_channels=8, num_classes=3)
    with pytest.raises(UsageError, match="HamLightHead") as err:
        MODELS.build(dict(head, in_index=[1, 2, 3], **swapped))
    assert "\n" not in str(err.value)
