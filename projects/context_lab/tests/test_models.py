"""Tests of the lab's Poly-NL block (Babiloni et al., ICCV 2021, Eq. 6-7) and PolyNLHead
(tools/lab/models/poly_nl.py)."""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import os.path as osp

import pytest
import torch
from mmengine.analysis import FlopAnalyzer
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmseg.registry import MODELS

from tools.lab.models import PolyNL, PolyNLHead

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
F64 = torch.float64


def randomised(c, seed=0):
    """A Poly-NL block with random weights and non-trivial alpha, beta, in float64."""
    torch.manual_seed(seed)
    block = PolyNL(c).double()
    with torch.no_grad():
        block.alpha.fill_(0.7)
        block.beta.fill_(-1.3)
    return block


def matrices(block):
    """W1, W2, W3 as the C x C matrices of Eq. 6 (X W with X of shape N x C)."""
    return [conv.weight[:, :, 0, 0].T for conv in (block.w1, block.w2, block.w3)]


def test_forward_is_eq6():
    block = randomised(6)
    x = torch.randn(2, 6, 5, 7, dtype=F64)
    W1, W2, W3 = matrices(block)
    X = x.flatten(2).transpose(1, 2)  # (B, N, C)
    phi = (X @ W1 * (X @ W2)).mean(dim=1, keepdim=True).expand_as(X)  # pool over N, expand
    Z = block.alpha * X + block.beta * ((phi * X) @ W3)
    expected = Z.transpose(1, 2).reshape(x.shape)
    torch.testing.assert_close(block(x), expected)


def test_element_wise_form_eq7():
    # y_ab = sum_{d,f,h} sum_e 1/N w1_hd w2_fd w3_db x_ad x_ef x_eh (the beta-branch alone)
    block = randomised(3, seed=1)
    with torch.no_grad():
        block.alpha.zero_()
        block.beta.fill_(1.0)
    x = torch.randn(1, 3, 2, 3, dtype=F64)
    W1, W2, W3 = matrices(block)
    X = x.flatten(2).transpose(1, 2)[0]  # (N, C)
    n = X.shape[0]
    y = torch.einsum("hd,fd,db,ad,ef,eh->ab", W1, W2, W3, X, X, X) / n
    torch.testing.assert_close(block(x)[0].flatten(1).T, y)


def test_starts_as_identity_and_beta_learns():
    block = PolyNL(8)
    x = torch.randn(2, 8, 4, 4)
    assert torch.equal(block(x), x)
    block(x).square().sum().backward()
    assert block.beta.grad.abs() > 0
    assert block.w3.weight.grad.abs().sum() == 0  # beta = 0 gates the branch at init
    assert sum(p.numel() for p in block.parameters()) == 3 * 8 * 8 + 2


def test_cost_is_linear_in_positions():
    block = PolyNL(16).eval()

    def macs(h, w):
        analyzer = FlopAnalyzer(block, (torch.randn(1, 16, h, w),))
        analyzer.unsupported_ops_warnings(False)
        return analyzer.by_operator()["conv"]

    assert macs(8, 8) == 3 * 16 * 16 * 64  # three N x C x C products, nothing in N^2
    assert macs(16, 16) == 4 * macs(8, 8)


def test_rejects_wrong_channels():
    with pytest.raises(ValueError, match="expected x"):
        PolyNL(8)(torch.randn(1, 4, 3, 3))
    with pytest.raises(ValueError, match="positive"):
        PolyNL(0)


def head_cfg(**kwargs):
    cfg = dict(
        type="PolyNLHead",
        in_channels=16,
        channels=8,
        num_classes=3,
        concat_input=True,
        norm_cfg=dict(type="BN", requires_grad=True),
    )
    cfg.update(kwargs)
    return cfg


def test_head_registered_and_trains():
    assert MODELS.get("PolyNLHead") is PolyNLHead and MODELS.get("PolyNL") is PolyNL
    head = MODELS.build(head_cfg(beta_init=0.5))
    assert head.poly_nl.in_channels == 8 and head.poly_nl.beta.item() == 0.5
    x = torch.randn(2, 16, 9, 11, requires_grad=True)
    out = head([x])
    assert out.shape == (2, 3, 9, 11)
    out.sum().backward()
    assert head.poly_nl.w1.weight.grad.abs().sum() > 0 and x.grad is not None


def test_head_is_nlhead_with_polynl():
    head = MODELS.build(head_cfg()).eval()
    x = torch.randn(1, 16, 6, 6)
    feats = head.convs[1](head.poly_nl(head.convs[0](x)))
    expected = head.cls_seg(head.conv_cat(torch.cat([x, feats], dim=1)))
    torch.testing.assert_close(head([x]), expected)
    with pytest.raises(ValueError, match="num_convs"):
        MODELS.build(head_cfg(num_convs=1))


def test_demo_config_builds():
    cfg = Config.fromfile(osp.join(REPO, "tools/lab/configs/polynl_r18-d8_context-shapes.py"))
    assert cfg.model.decode_head.type == "PolyNLHead"
    init_default_scope("mmseg")
    model = MODELS.build(cfg.model).eval()
    with torch.no_grad():
        out = model(torch.randn(1, 3, 33, 33), mode="tensor")
    assert out.shape[:2] == (1, cfg.num_classes)
