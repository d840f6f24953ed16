"""Tests of AttnConv (Andreoli, "Convolution, attention and structure embedding", Def. 1, 3-5,
Eq. 4, 7-10) and AttnConvHead, on odd-size grids (5 x 7) in float64."""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import os.path as osp

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample

from tools.lab.models import AttnConv, AttnConvHead
from tools.lab.models.attn_conv import window_mask

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
DEMO = osp.join(REPO, "tools", "lab", "configs", "attnconv_r18-d8_context-shapes.py")
F64 = torch.float64
B, C, H, W = 2, 6, 5, 7
N = H * W
SHIFTS = [(d0, d1) for d0 in (-1, 0, 1) for d1 in (-1, 0, 1)]


def randomised(seed=0, **kwargs):
    """A float64 AttnConv (C = 6, K = 3, D = 4, D_v = 5) with every parameter random."""
    torch.manual_seed(seed)
    kwargs = {"num_heads": 3, "key_dim": 4, "value_dim": 5, **kwargs}
    module = AttnConv(C, **kwargs).double()
    with torch.no_grad():
        for p in module.parameters():
            p.normal_()
    return module


def nodes(x):
    """x (B, C, H, W) as the node matrix (B, N, C), nodes in row-major order."""
    return x.flatten(2).transpose(1, 2)


def as_map(y):
    return y.transpose(1, 2).reshape(y.shape[0], -1, H, W)


def sdpa_reference(module, x, attn_mask=None):
    """Multi-head attention through F.scaled_dot_product_attention with the projections of
    Eq. 9-10: query X Lambda_k^query, key X Lambda_k^key, value X Theta_k^value, output
    [h_1 ... h_K] Theta^O^T (Theta^O = [Theta_1^O ... Theta_K^O], (C, K D_v))."""
    X = nodes(x)  # (B, N, C)
    q = torch.einsum("bnc,ckd->bknd", X, module.lambda_query)
    k = torch.einsum("bnc,ckd->bknd", X, module.lambda_key)
    v = torch.einsum("bnc,ckd->bknd", X, module.theta_value)
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)  # scale 1/sqrt(D)
    theta_o = module.theta_out.flatten(1)  # (C, K D_v)
    return as_map(heads.transpose(1, 2).flatten(2) @ theta_o.T)


def test_transformer_is_the_factorised_special_case():
    # mu = nu = xi = 0, no index heads: Eq. 7 with Eq. 9-10 is scaled dot-product attention
    module = randomised(with_mu=False, index_heads=False)
    x = torch.randn(B, C, H, W, dtype=F64)
    torch.testing.assert_close(module(x), sdpa_reference(module, x), rtol=1e-12, atol=1e-12)


def test_window_mask_is_sdpa_mask_transposed():
    # H is indexed [m, n] (input, output); SDPA's mask is [query n, key m]: H^T
    module = randomised(with_mu=False, index_heads=False, window=1)
    x = torch.randn(B, C, H, W, dtype=F64)
    mask = window_mask(H, W, 1).double()
    assert mask[0, 1] == 0 and mask[0, W + 1] == 0 and mask[0, 2] == -torch.inf
    # pairs at most 1 apart per coordinate: (H + 2 (H - 1)) (W + 2 (W - 1)) = 13 * 19
    assert mask[0, 2 * W] == -torch.inf and int((mask == 0).sum()) == (3 * H - 2) * (3 * W - 2)
    torch.testing.assert_close(module(x), sdpa_reference(module, x, mask.T), rtol=1e-12, atol=1e-12)
    # a window covering the grid masks nothing
    wide, full = randomised(window=max(H, W)), randomised()
    torch.testing.assert_close(wide(x), full(x), rtol=0, atol=0)


def shift_matrix(d):
    """Def. 1: (A_d)[m, n] = 1 iff node n is node m shifted by d on the H x W grid."""
    r, c = torch.arange(N) // W, torch.arange(N) % W
    return ((r[None, :] - r[:, None] == d[0]) & (c[None, :] - c[:, None] == d[1])).to(F64)


def test_index_heads_are_a_3x3_convolution():
    module = randomised(num_heads=0, index_heads=True)
    x = torch.randn(B, C, H, W, dtype=F64)
    theta = {d: module.theta_index[d[0] + 1, d[1] + 1] for d in SHIFTS}  # Theta_d, (C, C)
    # Eq. 4 with the dense shift matrices: y = sum_d A_d^T x Theta_d
    dense = sum(shift_matrix(d).T @ nodes(x) @ theta[d] for d in SHIFTS)
    # the same as conv2d (cross-correlation): tap 1 - d holds Theta_d^T, zero padding 1
    kernel = torch.zeros(C, C, 3, 3, dtype=F64)
    for d0, d1 in SHIFTS:
        kernel[:, :, 1 - d0, 1 - d1] = theta[(d0, d1)].T
    torch.testing.assert_close(module(x), as_map(dense), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(module(x), F.conv2d(x, kernel, padding=1), rtol=1e-12, atol=1e-12)
    assert sum(p.numel() for p in module.parameters()) == 9 * C * C


def test_masked_input_has_no_influence():
    # all heads and terms on; input node m = (4, 6) is masked for output node n = (0, 1) only
    # (m is not a grid neighbour of n, so no shift head links them either)
    module = randomised(with_nu=True, with_xi=True)
    m, n, other = 4 * W + 6, 1, 2 * W + 3
    mask = torch.zeros(N, N, dtype=F64)
    mask[m, n] = -torch.inf
    x = torch.randn(B, C, H, W, dtype=F64, requires_grad=True)
    y = module(x, mask)
    x2 = x.detach().clone()
    x2[:, :, 4, 6] += torch.randn(B, C, dtype=F64) * 10
    y2 = module(x2, mask)
    assert torch.equal(y[:, :, 0, 1], y2[:, :, 0, 1])  # bit-identical at n
    assert (y[:, :, 1, 3] - y2[:, :, 1, 3]).abs().max() > 1e-3  # other outputs do see m
    (grad,) = torch.autograd.grad(y[:, :, 0, 1].sum(), x)
    grad = nodes(grad)  # (B, N, C): d y_n / d x_m'
    assert torch.equal(grad[:, m], torch.zeros(B, C, dtype=F64))
    assert grad[:, other].abs().min() > 0 and grad[:, n].abs().min() > 0


def test_window_limits_the_receptive_field():
    module = randomised(window=1)
    x = torch.randn(1, C, H, W, dtype=F64, requires_grad=True)
    (grad,) = torch.autograd.grad(module(x)[0, :, 2, 3].sum(), x)
    reach = grad[0].abs().sum(0) > 0  # (H, W): inputs that reach output (2, 3)
    expected = torch.zeros(H, W, dtype=torch.bool)
    expected[1:4, 2:5] = True
    assert torch.equal(reach, expected)


def test_nu_and_xi_are_inert_mu_is_not():
    # Column softmax over m: 1_M (x nu_k)^T and xi_k are constant along each column of A_k
    module = randomised(with_nu=True, with_xi=True, index_heads=False)
    x = torch.randn(B, C, H, W, dtype=F64)
    y = module(x)
    with torch.no_grad():
        module.nu.normal_(0.0, 5.0)
        module.xi.normal_(0.0, 5.0)
    torch.testing.assert_close(module(x), y, rtol=1e-12, atol=1e-12)
    module(x).square().sum().backward()
    assert module.nu.grad.abs().max() < 1e-9 and module.xi.grad.abs().max() < 1e-9
    assert module.mu.grad.abs().max() > 1e-3
    with torch.no_grad():
        module.mu.normal_()
    assert (module(x) - y).abs().max() > 1e-2


def test_starts_from_zero_affine_terms_and_validates():
    module = AttnConv(8, num_heads=2, key_dim=3, with_nu=True, with_xi=True, index_heads=False)
    assert module.mu.abs().sum() == module.nu.abs().sum() == module.xi.abs().sum() == 0
    counts = {name: p.numel() for name, p in module.named_parameters()}
    assert counts == dict(
        lambda_key=48, lambda_query=48, theta_value=48, theta_out=48, mu=16, nu=16, xi=2
    )
    with pytest.raises(ValueError, match="content heads"):
        AttnConv(8, num_heads=0, index_heads=False)
    with pytest.raises(ValueError, match="key_dim"):
        AttnConv(8, key_dim=0)


def head_param_count(c_in, c, k, d, dv, classes):
    """Closed form of AttnConvHead's parameters (3x3 convs without bias before BN)."""
    convs = 9 * c_in * c + 9 * c * c + 3 * 2 * c  # squeeze, align, three BNs (block's too)
    attn = 4 * k * c * d if d == dv else 2 * k * c * (d + dv)
    return convs + attn + k * c + 9 * c * c + c * classes + classes


def test_head_from_demo_config_trains():
    init_default_scope("mmseg")
    torch.manual_seed(0)
    cfg = Config.fromfile(DEMO)
    assert cfg.demo_name == "AttnConv"
    head = MODELS.build(cfg.model.decode_head)
    assert type(head) is AttnConvHead and MODELS.get("AttnConv") is AttnConv
    assert sum(p.numel() for p in head.parameters()) == head_param_count(128, 128, 8, 16, 16, 7)
    assert sum(p.numel() for p in head.parameters()) == 510_599
    feats = [None, None, None, torch.randn(2, 128, 5, 7)]
    label = torch.randint(0, 7, (2, 1, 40, 56))
    samples = [
        SegDataSample(gt_sem_seg=PixelData(data=label[i]), metainfo=dict(img_shape=(40, 56)))
        for i in range(2)
    ]
    head.train()
    optimizer = torch.optim.AdamW(head.parameters(), lr=1e-3)
    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        loss = head.loss(feats, samples, {})["loss_ce"]
        loss.backward()
        grads = [p.grad for p in head.attn_conv.parameters()]
        assert all(g is not None and torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads)
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_head_block_is_skip_norm_act():
    head = AttnConvHead(
        attn_channels=8,
        attn_cfg=dict(num_heads=2, key_dim=4, window=2),
        in_channels=5,
        channels=6,
        num_classes=3,
        norm_cfg=dict(type="BN", requires_grad=True),
    ).eval()
    x = torch.randn(1, 5, 5, 7)
    z = head.squeeze(x)
    expected = head.cls_seg(head.align((z + head.attn_norm(head.attn_conv(z))).relu()))
    torch.testing.assert_close(head([x]), expected)
    assert head.attn_conv.window == 2
