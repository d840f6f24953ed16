"""Table 2's ablation configs, Table 8's uniform NMF codes, and the release's head init.

Each config under configs/hamnet/ablations/ changes one setting of the R50 ablation base (Table
2's "basic"), carries the paper's mIoU in its header, builds, and runs; the head's parameter
count relative to table2_baseline is the paper's, in the release's units of 2^20 (Table 2,
"Params").
"""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import functools
import glob
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmseg.registry import MODELS
from torch import nn

from hamseg.models import Hamburger
from tests.conftest import REPO
from tests.helpers import one_thread  # noqa: F401  (fixture)
from tests.helpers import paper_recipes

pytestmark = pytest.mark.usefixtures("one_thread")

ABLATIONS = osp.join(REPO, "configs", "hamnet", "ablations")
BASE = "hamnet_r50-d16_1xb12-30k_voc12aug-513x513.py"
C = 512  # d = d_z: the squeeze's output and the Hamburger's channels
#: config: (decode_head settings over the base, the paper's best(mean) mIoU, Table 2's "Params"
#: relative to the baseline in M = 2^20, the exact count relative to the baseline).
CONFIGS = {
    "table2_baseline.py": (dict(with_hamburger=False), "75.9(75.7)", 0.0, 0),
    BASE: ({}, "78.3(77.8)", 0.50, (C * C + C) + C * C + 2 * C),
    "table2_no-ham.py": (dict(with_ham=False), "75.8(75.6)", 0.50, (C * C + C) + C * C + 2 * C),
    "table2_no-upper-bread.py": (dict(with_upper_bread=False), "77.0(76.8)", 0.25, C * C + 3 * C),
    "table2_no-lower-bread.py": (dict(with_lower_bread=False), "77.3(77.2)", 0.25, C * C + 2 * C),
    "table2_only-ham.py": (
        dict(with_lower_bread=False, with_upper_bread=False),
        "77.0(76.8)",
        0.0,
        2 * C,
    ),
    "nmf_coef-uniform.py": (dict(coef_init="uniform"), "77.8(77.6)", 0.50, 525_824),
}
BN = dict(type="BN", requires_grad=True)


def load(name: str) -> Config:
    return Config.fromfile(osp.join(ABLATIONS, name))


def build_head(name: str) -> nn.Module:
    """The config's decode head as configured, with BN for SyncBN (one process)."""
    init_default_scope("mmseg")
    torch.manual_seed(0)
    return MODELS.build(dict(load(name).model.decode_head, norm_cfg=BN))


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@functools.cache
def head_params(name: str) -> int:
    return n_params(build_head(name))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_config_changes_one_setting_and_states_the_paper(name):
    settings, miou, _, _ = CONFIGS[name]
    base, cfg = load(BASE).to_dict(), load(name).to_dict()
    head, base_head = cfg["model"].pop("decode_head"), base["model"].pop("decode_head")
    assert cfg == base, name  # everything outside the head is the base's
    if "coef_init" in settings:
        assert head.pop("ham_cfg") == dict(base_head.pop("ham_cfg"), **settings)
    else:
        assert {k: head.pop(k) for k in settings} == settings
    assert head == base_head
    header = open(osp.join(ABLATIONS, name)).read().split("_base_")[0]
    assert miou in header, header


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_head_parameters_relative_to_the_baseline_are_table2s(name):
    _, _, paper_m, exact = CONFIGS[name]
    extra = head_params(name) - head_params("table2_baseline.py")
    assert extra == exact
    assert round(extra / 2**20, 2) == paper_m


def test_baseline_has_table2s_32_67M_parameters():
    """The whole baseline model (dilated R50 with the deep stem, squeeze, align, classifier):
    32.67M in the release's M = 2^20."""
    cfg = load("table2_baseline.py")
    cfg.model.backbone.init_cfg = None
    init_default_scope("mmseg")
    model = MODELS.build(cfg.model)
    head = (2048 * C * 9 + 2 * C) + (C * 256 * 9 + 2 * 256) + (256 * 21 + 21)
    assert n_params(model.decode_head) == head
    assert round(n_params(model) / 2**20, 2) == 32.67


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_head_as_configured_runs(name):
    """Forward in eval and a loss backward in training on tiny 2048-channel features."""
    head = build_head(name)
    has_ham = isinstance(head.hamburger, Hamburger)
    assert has_ham == (name != "table2_baseline.py")
    feats = [None, None, None, torch.rand(2, 2048, 5, 7)]  # in_index 3: ResNet's layer 4
    head.eval()
    with torch.no_grad():
        logits = head(feats)
    assert logits.shape == (2, 21, 5, 7) and torch.isfinite(logits).all()
    head.train()
    head(feats).logsumexp(dim=1).mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in head.parameters() if p.grad is not None)
    if has_ham and head.hamburger.ham is not None:
        assert head.hamburger.ham.coef_init == CONFIGS[name][0].get("coef_init", "softmax")


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_whole_segmentor_as_configured_runs(name):
    """The config's whole model (dilated R50, output stride 16, and the head) on a tiny odd-size
    image: SyncBN reverted to BN for one process, no pretrained weights."""
    from mmengine.model import revert_sync_batchnorm

    cfg = load(name)
    cfg.model.backbone.init_cfg = None
    init_default_scope("mmseg")
    torch.manual_seed(0)
    model = revert_sync_batchnorm(MODELS.build(cfg.model)).eval()
    with torch.no_grad():
        logits = model(torch.rand(1, 3, 65, 67), mode="tensor")
    assert logits.shape == (1, 21, 5, 5) and torch.isfinite(logits).all()  # ceil(65 / 16) = 5
    assert isinstance(model.decode_head.hamburger, Hamburger) == (name != "table2_baseline.py")


PAPER_RECIPES = paper_recipes()
OTHER_HAMHEADS = sorted(
    glob.glob(osp.join(REPO, "configs", "demo", "hamhead-*.py"))
    + glob.glob(osp.join(REPO, "configs", "custom", "hamhead-*.py"))
)


def test_paper_recipes_init_the_head_like_the_release_and_the_demo_keeps_mmseg():
    """Issue [paper]: squeeze, align and classifier with PyTorch's default init in the paper
    recipes (the release); the demo and custom configs keep mmseg's (their numbers stand)."""
    assert len(PAPER_RECIPES) >= 10 + len(CONFIGS) and OTHER_HAMHEADS
    for path in PAPER_RECIPES:
        assert Config.fromfile(path).model.decode_head.conv_init == "pytorch", path
    for path in OTHER_HAMHEADS:
        assert Config.fromfile(path).model.decode_head.get("conv_init", "mmseg") == "mmseg", path
