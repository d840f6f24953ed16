"""Poly-NL (Babiloni et al., ICCV 2021, Eq. 6-7) and AttnConv (Andreoli, Def. 1, 3-5, Eq. 4,
7-10) against their equations in float64 on odd grids; their heads train from the lab configs."""

import os.path as osp

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmseg.registry import MODELS

from projects.context_lab.context_lab import AttnConv, AttnConvHead, PolyNL, PolyNLHead
from projects.context_lab.context_lab.attn_conv import window_mask

CONFIGS = osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), "configs")


def test_forward_is_eq6():
    torch.manual_seed(0)
    block = PolyNL(6).double()
    with torch.no_grad():  # non-trivial alpha, beta
        block.alpha.fill_(0.7)
        block.beta.fill_(-1.3)
    x = torch.randn(2, 6, 5, 7, dtype=F64)
    # W1, W2, W3 as the C x C matrices of Eq. 6 (X W with X of shape N x C)
    W1, W2, W3 = (conv.weight[:, :, 0, 0].T for conv in (block.w1, block.w2, block.w3))
    X = x.flatten(2).transpose(1, 2)  # (B, N, C)
    phi = (X @ W1 * (X @ W2)).mean(dim=1, keepdim=True).expand_as(X)  # pool over N, expand
    Z = block.alpha * X + block.beta * ((phi * X) @ W3)
    expected = Z.transpose(1, 2).reshape(x.shape)
    torch.testing.assert_close(block(x), expected)


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


@pytest.mark.parametrize(
    "name, head_type, params",
    [("polynl", PolyNLHead, 640_649), ("attnconv", AttnConvHead, 510_599)],
)
def test_lab_heads_build_from_their_configs_and_learn(name, head_type, params):
    init_default_scope("mmseg")
    torch.manual_seed(0)
    cfg = Config.fromfile(osp.join(CONFIGS, f"{name}_r18-d8_context-shapes.py"))
    model = MODELS.build(cfg.model)
    assert type(model.decode_head) is head_type
    # PolyNL: 2 x (3x3 conv 128 + BN) + 3 x 128^2 + 2 + 3x3 conv 256 -> 128 + BN + 128 x 7 + 7
    assert sum(p.numel() for p in model.decode_head.parameters()) == params
    x, y = torch.randn(2, 3, 33, 41), torch.randint(0, 7, (2, 33, 41))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(4):
        optimizer.zero_grad()
        loss = F.cross_entropy(F.interpolate(model(x, mode="tensor"), (33, 41)), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_polynl_starts_as_identity_and_rejects_wrong_channels():
    block = PolyNL(8)
    x = torch.randn(2, 8, 4, 4)
    assert torch.equal(block(x), x)
    block(x).square().sum().backward()
    assert block.beta.grad.abs() > 0 and block.w3.weight.grad.abs().sum() == 0  # beta = 0 gates
    assert sum(p.numel() for p in block.parameters()) == 3 * 8 * 8 + 2
    with pytest.raises(ValueError, match="expected x"):
        block(torch.randn(1, 4, 3, 3))
    with pytest.raises(ValueError, match="num_convs"):
        PolyNLHead(num_convs=1, in_channels=4, channels=4, num_classes=2)
