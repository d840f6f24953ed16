"""HamHead: forward/backward and loss, the release's names, evaluation protocols, Table 2's
baseline and switches, the release's head init (conv_init='pytorch'), training with a Runner."""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import ast
from pathlib import Path

import pytest
import torch
from mmengine.config import ConfigDict
from mmengine.registry import DefaultScope
from mmengine.runner import Runner
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample
from torch.utils.data import Dataset

from hamseg.models import CD, Hamburger, HamHead
from hamseg.utils.errors import UsageError

OFFICIAL = Path("/work/shared/reference/official-hamnet-r101-v2-nmf-state-dict.txt")
BN = dict(type="BN", requires_grad=True)
SMALL = dict(in_channels=8, channels=4, num_classes=3, ham_channels=6, norm_cfg=BN)


def sample(h, w, label):
    return SegDataSample(
        gt_sem_seg=PixelData(data=label[None]), metainfo=dict(img_shape=(h, w), ori_shape=(h, w))
    )


def test_forward_backward_and_loss_with_every_option_from_config():
    head = MODELS.build(
        dict(
            type="HamHead",
            in_channels=64,
            channels=8,
            num_classes=19,
            ham_channels=32,
            variant="paper",
            ham_cfg=dict(type="CD", S=2, R=5, train_steps=3, eval_steps=4, inv_t=10, beta=0.05),
            norm_cfg=BN,
        )
    )
    ham = head.hamburger.ham
    assert isinstance(ham, CD) and head.hamburger.variant == "paper" and head.dropout.p == 0.1
    got = (ham.S, ham.D, ham.R, ham.train_steps, ham.eval_steps, ham.inv_t, ham.beta)
    assert got == (2, 16, 5, 3, 4, 10.0, 0.05)
    feat = torch.randn(1, 64, 15, 17, requires_grad=True)
    out = head([feat])
    assert out.shape == (1, 19, 15, 17)
    out.square().mean().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in head.parameters())
    losses = head.loss([feat.detach()], [sample(60, 68, torch.randint(0, 19, (60, 68)))], {})
    assert torch.isfinite(losses["loss_ce"])


def test_default_head_evaluates_with_the_papers_protocol():
    """NMF r=64, a new dictionary at every forward (the same for the same global seed); the
    ensemble (eval_seed=0, eval_draws=12) gives one set of logits at every forward."""
    head = HamHead(**SMALL).eval()
    ham = head.hamburger.ham
    assert (type(ham).__name__, ham.R, ham.eval_seed, ham.eval_draws) == ("NMF", 64, None, 1)
    feat = torch.rand(2, 8, 9, 11)
    with torch.no_grad():
        torch.manual_seed(3)
        out = head([feat])
        assert not torch.equal(out, head([feat]))
        torch.manual_seed(3)
        assert torch.equal(out, head([feat]))
        ham.eval_seed, ham.eval_draws = 0, 12
        ensemble = head([feat])
        assert torch.equal(ensemble, head([feat])) and not torch.allclose(ensemble, out)


def test_the_releases_head_tensors_load_strictly():
    official = {}
    for line in OFFICIAL.read_text().splitlines():
        name, rest = line.split(" ", 1)
        if not name.startswith("backbone."):
            shape = tuple(ast.literal_eval(rest.rsplit(" ", 1)[0]))
            official[name.replace("fc.1.", "conv_seg.", 1)] = shape
    assert len(official) == 23
    head = HamHead(in_channels=2048, channels=256, num_classes=21, ham_channels=512, norm_cfg=BN)
    assert {k: tuple(v.shape) for k, v in head.state_dict().items()} == official
    state = {
        k: torch.zeros(s, dtype=torch.long if "tracked" in k else None) for k, s in official.items()
    }
    head.load_state_dict(state, strict=True)


def test_baseline_head_is_squeeze_align_classifier_and_switches_reach_the_hamburger():
    """Table 2's baseline (no Hamburger) and the Hamburger's switches given to the head."""
    head = HamHead(with_hamburger=False, **SMALL).eval()
    assert not any(isinstance(m, Hamburger) for m in head.modules())
    feat = torch.rand(2, 8, 5, 7)
    with torch.no_grad():
        torch.testing.assert_close(head([feat]), head.conv_seg(head.align(head.squeeze(feat))))
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n(head) == (8 * 6 * 9 + 2 * 6) + (6 * 4 * 9 + 2 * 4) + (4 * 3 + 3)
    assert n(HamHead(**SMALL)) - n(head) == (6 * 6 + 6) + (6 * 6 + 2 * 6) + 6 * 6  # release
    ham = HamHead(variant="paper", with_ham=False, with_upper_bread=False, **SMALL).hamburger
    assert ham.ham is None and isinstance(ham.upper_bread, torch.nn.Identity)
    assert isinstance(ham.norm, torch.nn.BatchNorm2d) and len(ham.lower_bread) == 2
    gn = HamHead(**dict(SMALL, norm_cfg=dict(type="GN", num_groups=2)), act_cfg=dict(type="GELU"))
    assert isinstance(gn.hamburger.cheese.gn, torch.nn.GroupNorm)
    assert isinstance(gn.hamburger.act, torch.nn.GELU)  # the head's norm and act


@pytest.mark.parametrize("conv_init", ["mmseg", "pytorch"])
def test_conv_init_of_squeeze_align_classifier_and_the_hamburgers_own(conv_init):
    """'pytorch' (the paper recipes, as the release): nn.Conv2d's default U(-b, b), b = 1 /
    sqrt(fan_in), kept through mmengine's init_weights; 'mmseg': Kaiming normal (fan_out) and
    Normal(0.01). The Hamburger keeps the release's N(0, sqrt(2 / out_channels)) either way."""
    torch.manual_seed(0)
    kwargs = dict(in_channels=2048, channels=256, num_classes=21, ham_channels=512, norm_cfg=BN)
    head = HamHead(conv_init=conv_init, **kwargs)
    head.init_weights()
    convs = (head.squeeze.conv, head.align.conv, head.conv_seg)
    for conv, mmseg_std in zip(convs, [(2 / (512 * 9)) ** 0.5, (2 / (256 * 9)) ** 0.5, 0.01]):
        bound = 1 / conv.weight[0].numel() ** 0.5
        if conv_init == "pytorch":
            assert conv.weight.abs().max() <= bound
            assert abs(conv.weight.std().item() * 3**0.5 / bound - 1) < 0.04
        else:
            assert abs(conv.weight.std().item() / mmseg_std - 1) < 0.05
    for conv in (head.hamburger.lower_bread[0], head.hamburger.cheese.conv):
        assert abs(conv.weight.std().item() / (2 / 512) ** 0.5 - 1) < 0.01
    assert torch.equal(head.hamburger.cheese.bn.weight, torch.ones(512))


@pytest.mark.parametrize("swapped", [dict(ham_kwargs=dict(MD_R=16)), dict()])
def test_hamhead_in_a_segnext_config_says_to_use_hamlighthead(swapped):
    """mmseg's SegNeXt decode_head with type='HamHead': one line naming the head to use."""
    head = dict(type="HamHead", in_channels=[8, 16, 24], channels=8, ham_channels=8, num_classes=3)
    with pytest.raises(UsageError, match="HamLightHead") as err:
        MODELS.build(dict(head, in_index=[1, 2, 3], **swapped))
    assert "\n" not in str(err.value)


class TinySegDataset(Dataset):
    """Four random 33x35 images whose label is "red channel > 127"."""

    def __init__(self):
        self.images = torch.randint(0, 256, (4, 3, 33, 35), generator=torch.Generator())

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        img = self.images[i].to(torch.uint8)
        return dict(inputs=img, data_samples=sample(33, 35, (img[2] > 127).long()))


@pytest.mark.slow
def test_encoder_decoder_with_conv_init_pytorch_trains_with_runner(tmp_path):
    """A tiny segmentor through mmengine's Runner (its init_weights keeps conv_init='pytorch');
    seeded evaluation repeats its logits."""
    head = dict(type="HamHead", in_channels=128, in_index=0, channels=16, ham_channels=32)
    head.update(ham_cfg=dict(type="NMF", R=4, eval_seed=0), num_classes=2, norm_cfg=BN)
    preprocessor = dict(type="SegDataPreProcessor", mean=[123.675, 116.28, 103.53], size=(33, 35))
    preprocessor.update(std=[58.395, 57.12, 57.375], bgr_to_rgb=True)
    backbone = dict(type="ResNetV1c", depth=18, stem_channels=16, base_channels=16)
    backbone.update(out_indices=(3,), norm_cfg=BN)
    with DefaultScope.overwrite_default_scope("mmseg"):
        model = MODELS.build(
            dict(
                type="EncoderDecoder",
                data_preprocessor=preprocessor,
                backbone=backbone,
                decode_head=dict(head, conv_init="pytorch"),
                test_cfg=ConfigDict(mode="whole"),
            )
        )
    runner = Runner(
        model=model,
        work_dir=str(tmp_path),
        train_dataloader=dict(
            dataset=TinySegDataset(),
            sampler=dict(type="InfiniteSampler", shuffle=True),
            batch_size=2,
            num_workers=0,
            collate_fn=dict(type="pseudo_collate"),
        ),
        train_cfg=dict(type="IterBasedTrainLoop", max_iters=4),
        optim_wrapper=dict(type="OptimWrapper", optimizer=dict(type="SGD", lr=0.01, momentum=0.9)),
        randomness=dict(seed=0),
        default_scope="mmseg",
        log_level="WARNING",
    )
    model.init_weights()  # what the Runner calls: the segmentor's reaches the head's
    for conv in (model.decode_head.squeeze.conv, model.decode_head.conv_seg):
        assert conv.weight.abs().max() <= 1 / conv.weight[0].numel() ** 0.5  # U(-b, b)
    before = model.decode_head.hamburger.lower_bread[0].weight.detach().clone()
    runner.train()
    assert not torch.equal(model.decode_head.hamburger.lower_bread[0].weight, before)
    model.eval()
    item = TinySegDataset()[0]
    batch = dict(inputs=[item["inputs"]], data_samples=[item["data_samples"]])
    with torch.no_grad():
        a, b = model.test_step(batch), model.test_step(batch)
    assert a[0].pred_sem_seg.data.shape == (1, 33, 35)
    assert torch.equal(a[0].seg_logits.data, b[0].seg_logits.data)
