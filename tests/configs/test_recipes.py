"""The recipe configs hold the paper's / release's values (shared/reference/hamburger-facts.md).

Values are read from the merged configs and, where the config could say one thing and the model
do another (norm layers, dilations, stem, parameter groups), from the built model.
"""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import inspect
import glob
import os
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope
from mmseg.registry import MODELS
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from tests.conftest import REPO
from tests.helpers import one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

TRAIN_SCALES = [0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]
TTA_SCALES = [0.5, 0.75, 1.0, 1.25, 1.5, 1.75]
ABLATIONS = osp.join("configs", "hamnet", "ablations")
ABLATION_BASE = "hamnet_r50-d16_1xb12-30k_voc12aug-513x513.py"


def load(*parts: str) -> Config:
    return Config.fromfile(osp.join(REPO, *parts))


def build(cfg: Config) -> nn.Module:
    init_default_scope("mmseg")
    cfg.model.backbone.init_cfg = None
    torch.manual_seed(0)
    return MODELS.build(cfg.model)


@pytest.fixture(scope="module")
def voc() -> Config:
    return load("configs", "ham_voc.py")


@pytest.fixture(scope="module")
def voc_model(voc) -> nn.Module:
    return build(load("configs", "ham_voc.py"))


def train_pipeline(cfg: Config) -> list:
    dataset = cfg.train_dataloader.dataset
    return (dataset.datasets[0] if dataset.type == "ConcatDataset" else dataset).pipeline


def check_data(cfg: Config, batch: int = 2, tta: str = "HamSegTTAModel") -> None:
    """Crop 513, the release's scales 0.5..2.0 of the original image, flip, batch per GPU, TTA."""
    assert cfg.model.data_preprocessor.size == (513, 513)
    assert (
        cfg.model.data_preprocessor.pad_val == 0 and cfg.model.data_preprocessor.seg_pad_val == 255
    )
    assert cfg.model.data_preprocessor.mean == [123.675, 116.28, 103.53]
    assert cfg.model.data_preprocessor.std == [58.395, 57.12, 57.375]
    steps = {t["type"]: t for t in train_pipeline(cfg)}
    assert steps["HamReleaseRescale"]["ratios"] == TRAIN_SCALES
    assert steps["RandomCrop"]["crop_size"] == (513, 513)
    assert steps["RandomCrop"].get("cat_max_ratio", 1.0) == 1.0  # plain random crop
    assert steps["RandomFlip"]["prob"] == 0.5
    assert "PhotoMetricDistortion" not in steps
    assert cfg.train_dataloader.batch_size == batch
    assert cfg.tta_pipeline == cfg.test_dataloader.dataset.pipeline  # the model makes the views
    if tta == "HamSegTTAModel":  # the release's 12 views
        expected = dict(scales=TTA_SCALES, flip=True, pad_stride=8, merge="logits_sum")
    else:  # App. E.3: the attention models' (PyTorch-Encoding's) test
        expected = dict(base_size=520, crop_size=513, scales=TRAIN_SCALES, flip=True)
    assert cfg.tta_model.type == tta
    got = {k: v.default for k, v in inspect.signature(MODELS.get(tta)).parameters.items()}
    got.update(cfg.tta_model)  # the class's defaults, for what a config leaves out
    assert {
        k: list(v) if isinstance(v, tuple) else v for k, v in got.items() if k in expected
    } == expected
    assert cfg.model.test_cfg.mode == "whole"
    val_steps = [t["type"] for t in cfg.val_dataloader.dataset.pipeline]
    assert "Resize" not in val_steps  # validation at the original size


def check_schedule(cfg: Config, lr: float, iters: int) -> None:
    """SGD momentum 0.9, wd 1e-4, poly 0.9 to 0 without warm-up, the release's groups."""
    opt = cfg.optim_wrapper.optimizer
    assert (opt.type, opt.lr, opt.momentum, opt.weight_decay) == ("SGD", lr, 0.9, 1e-4)
    assert opt.fused is True  # torch's one-kernel SGD (docs/gpu.md)
    assert cfg.optim_wrapper.paramwise_cfg == dict(
        norm_decay_mult=0.0, custom_keys={".bias": dict(lr_mult=2.0, decay_mult=0.0)}
    )
    assert cfg.param_scheduler == [
        dict(type="PolyLR", eta_min=0.0, power=0.9, begin=0, end=iters, by_epoch=False)
    ]
    assert cfg.train_cfg.type == "IterBasedTrainLoop" and cfg.train_cfg.max_iters == iters
    assert cfg.auto_scale_lr.enable is False


def check_norms(cfg: Config) -> None:
    norm = cfg.model.backbone.norm_cfg
    assert norm == dict(type="SyncBN", requires_grad=True, momentum=3e-4)
    assert cfg.model.decode_head.norm_cfg == norm
    assert cfg.sync_bn == "torch"


def test_voc_stage1_recipe(voc):
    check_data(voc)
    check_schedule(voc, lr=0.009, iters=60000)
    check_norms(voc)
    backbone, head = voc.model.backbone, voc.model.decode_head
    assert (backbone.type, backbone.depth, backbone.stem_channels) == ("ResNetV1c", 101, 128)
    assert backbone.strides == (1, 2, 1, 1) and backbone.dilations == (1, 1, 2, 4)
    assert backbone.multi_grid == (2, 8, 16) and backbone.contract_dilation is True
    assert backbone.norm_eval is False
    assert backbone.init_cfg == dict(
        type="HamResNetPretrained", checkpoint="data/pretrained/resnet101-2a57e44d.pth"
    )
    assert (head.type, head.variant, head.in_index) == ("HamHead", "release", 3)
    assert (head.in_channels, head.ham_channels, head.channels) == (2048, 512, 256)
    assert head.num_classes == 21
    assert head.ham_cfg == NMF
    assert head.dropout_ratio == 0.1 and head.align_corners is True
    assert head.loss_decode.get("avg_non_ignore", False) is False  # release: mean over all pixels
    assert "auxiliary_head" not in voc.model
    # trainaug = VOC train (official labels) + SBD-only aug.txt = 10,582 images
    parts = voc.train_dataloader.dataset.datasets
    assert [(d.ann_file, d.data_prefix.seg_map_path) for d in parts] == [
        ("ImageSets/Segmentation/train.txt", "SegmentationClass"),
        ("ImageSets/Segmentation/aug.txt", "SegmentationClassAug"),
    ]
    assert voc.val_dataloader.dataset.ann_file == "ImageSets/Segmentation/val.txt"
    vis = voc.default_hooks.visualization
    assert vis.type == "SegVisualizationHook" and vis.draw is True and vis.interval == 500


def test_voc_model_structure(voc_model):
    backbone = voc_model.backbone
    stem_convs = [m for m in backbone.stem if isinstance(m, nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.stride) for c in stem_convs] == [
        (3, 64, (2, 2)),
        (64, 64, (1, 1)),
        (64, 128, (1, 1)),
    ]
    assert [b.conv2.dilation[0] for b in backbone.layer4] == [2, 8, 16]
    assert [b.conv2.dilation[0] for b in backbone.layer3] == [1] + [2] * 22
    assert [len(getattr(backbone, f"layer{i}")) for i in range(1, 5)] == [3, 4, 23, 3]
    backbone.eval()
    with torch.no_grad():
        feats = backbone(torch.zeros(1, 3, 65, 65))
    assert feats[3].shape[-2:] == (9, 9)  # output stride 8
    norms = [m for m in voc_model.modules() if isinstance(m, _BatchNorm)]
    assert len(norms) == 109  # stem 3 + 33 blocks x 3 + 4 downsample; squeeze, cheese, align
    assert all(isinstance(m, nn.SyncBatchNorm) and m.momentum == 3e-4 for m in norms)
    ham = voc_model.decode_head.hamburger
    assert ham.variant == "release" and hasattr(ham, "cheese")
    assert (ham.ham.R, ham.ham.D, ham.ham.train_steps, ham.ham.eval_steps) == (64, 512, 6, 6)


def test_voc_parameter_groups(voc, voc_model):
    init_default_scope("mmseg")
    wrapper = build_optim_wrapper(voc_model, voc.optim_wrapper)
    names = {id(p): n for n, p in voc_model.named_parameters()}
    modules = dict(voc_model.named_modules())
    seen = 0
    for group in wrapper.optimizer.param_groups:
        for param in group["params"]:
            seen += 1
            name = names[id(param)]
            owner = modules[name.rsplit(".", 1)[0]]
            got = (group["lr"], group["weight_decay"])
            if name.endswith(".bias"):  # conv and norm biases: 2x lr, no decay
                assert got == pytest.approx((0.018, 0.0)), name
            elif isinstance(owner, _BatchNorm):
                assert got == pytest.approx((0.009, 0.0)), name
            else:
                assert isinstance(owner, nn.Conv2d) and param.dim() == 4, name
                assert got == pytest.approx((0.009, 1e-4)), name
    assert seen == len(names)


def test_voc_stage2_recipe():
    cfg = load("configs", "ham_voc_trainval.py")
    check_data(cfg)
    check_schedule(cfg, lr=0.0009, iters=20000)
    check_norms(cfg)
    stage1 = "work_dirs/hamnet_r101-d8_8xb2-60k_voc12aug-513x513"
    assert cfg.load_from == f"{stage1}/iter_60000.pth"  # where stage 1 writes, by either name
    assert load("configs", "ham_voc.py").work_dir == stage1
    assert cfg.model.backbone.init_cfg is None
    data = cfg.train_dataloader.dataset
    assert (data.type, data.ann_file, data.data_prefix.seg_map_path) == (
        "PascalVOCDataset",
        "ImageSets/Segmentation/trainval.txt",
        "SegmentationClass",
    )
    long = load("configs", "hamnet", "hamnet_r101-d8_8xb2-20k_voc12trainval-513x513.py")
    assert long.load_from == "work_dirs/hamnet_r101-d8_8xb2-60k_voc12aug-513x513/iter_60000.pth"
    # the documented switch to the release's labels (docs/recipes.md, "Stage 2's labels")
    from hamseg.cli import build_config

    option = {"train_dataloader.dataset.data_prefix.seg_map_path": "SegmentationClassAug"}
    release = build_config(osp.join(REPO, "configs", "ham_voc_trainval.py"), option)
    prefix = release.train_dataloader.dataset.data_prefix
    assert (prefix.img_path, prefix.seg_map_path) == ("JPEGImages", "SegmentationClassAug")


CONTEXT_RECIPES = [
    ("ham_context.py", 59, "PascalContextDataset59", "IoUMetric"),
    ("ham_context_59.py", 59, "PascalContextDataset59", "IoUMetric"),
    ("ham_context_60.py", 60, "PascalContextDataset", "ContextIoUMetric"),
]


@pytest.mark.parametrize("name,classes,dataset,metric", CONTEXT_RECIPES)
def test_context_recipes(voc, name, classes, dataset, metric):
    """configs/ham_context.py is Table 5's protocol: 59 classes, background ignored in training
    (reduce_zero_label) and in the metric (mIoU over the 59); the 60-class recipe reports both."""
    cfg = load("configs", name)
    check_data(cfg, tta="MultiEvalTTAModel")
    check_schedule(cfg, lr=0.002, iters=25000)
    check_norms(cfg)
    assert cfg.model.decode_head.num_classes == classes
    assert cfg.model.backbone == voc.model.backbone
    for loader in (cfg.train_dataloader, cfg.val_dataloader):
        data = loader.dataset
        assert (data.type, data.data_root) == (dataset, "data/VOCdevkit/VOC2010")
        assert data.data_prefix.seg_map_path == "SegmentationClassContext"
        reduce = [t.get("reduce_zero_label", False) for t in data.pipeline if "Annot" in t.type]
        assert reduce == [classes == 59]
    assert cfg.val_dataloader.dataset.ann_file == "ImageSets/SegmentationContext/val.txt"
    assert cfg.val_evaluator.type == cfg.test_evaluator.type == metric
    assert cfg.val_evaluator.iou_metrics == ["mIoU"]
    assert cfg.model.test_cfg == dict(mode="whole", crop_size=(513, 513), stride=(342, 342))


SHORT_NAMES = {
    "ham_voc.py": "hamnet_r101-d8_8xb2-60k_voc12aug-513x513.py",
    "ham_voc_trainval.py": "hamnet_r101-d8_8xb2-20k_voc12trainval-513x513.py",
    "ham_voc_test.py": "hamnet_r101-d8_8xb2-20k_voc12trainval-513x513_voc12test.py",
    "ham_context.py": "hamnet_r101-d8_8xb2-25k_pascal-context-59-513x513.py",
    "ham_context_59.py": "hamnet_r101-d8_8xb2-25k_pascal-context-59-513x513.py",
    "ham_context_60.py": "hamnet_r101-d8_8xb2-25k_pascal-context-513x513.py",
    "ham_voc_v1c.py": "hamnet_r101-d8-v1c_8xb2-60k_voc12aug-513x513.py",
}


def test_the_context_release_msflip_config_is_the_headline_with_the_release_test():
    headline = load("configs", "ham_context.py").to_dict()
    msflip = load(
        "configs", "hamnet", "hamnet_r101-d8_8xb2-25k_pascal-context-59-513x513_release-msflip.py"
    ).to_dict()
    assert msflip.pop("tta_model") == dict(
        type="HamSegTTAModel", scales=TTA_SCALES, flip=True, pad_stride=8, merge="logits_sum"
    )
    headline.pop("tta_model")
    assert msflip == headline  # the same model, data, metric and run folder


def test_long_and_short_names_agree():
    assert sorted(SHORT_NAMES) == sorted(
        osp.basename(p) for p in glob.glob(osp.join(REPO, "configs", "ham_*.py"))
    )
    for short, long in SHORT_NAMES.items():
        a, b = load("configs", short).to_dict(), load("configs", "hamnet", long).to_dict()
        assert a.pop("work_dir") == f"work_dirs/{long[:-3]}", short  # the twin's run folder
        assert a == b, short


def test_v1c_variant_only_changes_the_backbone_weights(voc):
    cfg = load("configs", "ham_voc_v1c.py")
    assert cfg.model.backbone.stem_channels == 64
    assert cfg.model.backbone.init_cfg == dict(
        type="Pretrained", checkpoint="open-mmlab://resnet101_v1c"
    )
    a, b = cfg.to_dict(), voc.to_dict()
    for d in (a, b):
        d["model"]["backbone"].pop("stem_channels", None)
        d["model"]["backbone"].pop("init_cfg")
        d.pop("work_dir", None)  # ham_voc.py names its twin's run folder
    assert a == b


#: Each ablation config: the ham_cfg it must have (everything else equal to its base).
#: Every recipe evaluates with the paper's protocol: a new dictionary at every forward.
HAM = dict(S=1, R=64, train_steps=6, eval_steps=6, grad="one_step", eval_seed=None, eval_draws=1)
NMF = dict(HAM, type="NMF", inv_t=1, init="random")
CD = dict(HAM, type="CD", inv_t=100, beta=0.1, eta=0.9, init="online")
VQ = dict(HAM, type="VQ", inv_t=100, init="random")
ABLATION_HAMS = {
    ABLATION_BASE: NMF,
    "nmf_bptt.py": dict(NMF, grad="bptt"),
    "nmf_init-fixed.py": dict(NMF, init="fixed"),
    "nmf_init-learned.py": dict(NMF, init="learned", grad="bptt"),
    "nmf_init-online.py": dict(NMF, init="online"),
    "nmf_coef-uniform.py": dict(NMF, coef_init="uniform"),
    "cd.py": CD,
    "cd_bptt.py": dict(CD, grad="bptt"),
    "cd_init-fixed.py": dict(CD, init="fixed"),
    "cd_init-learned.py": dict(CD, init="learned", grad="bptt"),
    "cd_init-random.py": dict(CD, init="random"),
    "cd_t1.py": dict(CD, inv_t=1),
    "cd_t0p1.py": dict(CD, inv_t=10),
    "vq.py": VQ,
    "vq_bptt.py": dict(VQ, grad="bptt"),
    "vq_init-fixed.py": dict(VQ, init="fixed"),
    "vq_init-learned.py": dict(VQ, init="learned", grad="bptt"),
    "vq_init-online.py": dict(VQ, init="online"),
}


def test_ablation_base_recipe():
    cfg = load(ABLATIONS, ABLATION_BASE)
    check_data(cfg, batch=12)
    check_schedule(cfg, lr=0.009, iters=30000)
    check_norms(cfg)
    backbone = cfg.model.backbone
    assert (backbone.depth, backbone.stem_channels) == (50, 128)
    assert backbone.strides == (1, 2, 2, 1) and backbone.dilations == (1, 1, 1, 2)
    assert backbone.multi_grid == (1, 4, 8)
    assert backbone.init_cfg.checkpoint == "data/pretrained/resnet50-ebb6acbb.pth"
    assert cfg.model.decode_head.variant == "paper"  # Table 2: +0.50M parameters
    model = build(cfg)
    ham = model.decode_head.hamburger
    ham_params = sum(p.numel() for p in ham.parameters())
    assert ham_params / 2**20 == pytest.approx(0.50, abs=0.005)  # the release counts M = 2^20
    model.backbone.eval()
    with torch.no_grad():
        assert model.backbone(torch.zeros(1, 3, 65, 65))[3].shape[-2:] == (5, 5)  # OS 16


def test_ablation_configs_change_one_setting():
    found = {f for f in os.listdir(osp.join(REPO, ABLATIONS)) if f.endswith(".py")}
    # Table 2's configs change the head, not the ham: tests/configs/test_ablations_table2.py
    assert {f for f in found if not f.startswith("table2_")} == set(ABLATION_HAMS)
    base = load(ABLATIONS, ABLATION_BASE).to_dict()
    for name, ham in ABLATION_HAMS.items():
        cfg = load(ABLATIONS, name).to_dict()
        assert cfg["model"]["decode_head"].pop("ham_cfg") == ham, name
        other = dict(base, model=dict(base["model"]))
        other["model"]["decode_head"] = {
            k: v for k, v in base["model"]["decode_head"].items() if k != "ham_cfg"
        }
        assert cfg == other, name
