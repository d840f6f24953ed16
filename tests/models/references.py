"""Independent references for the model tests: Alg. 1-3 written out in the paper's layout (codes
C of shape (b, R, N)), seeded dictionaries and perturbed norms."""

import torch
import torch.nn.functional as F
from torch import nn

EPS = 1e-6  # every denominator of the release


def unit(t, dim=1):
    return t / t.norm(dim=dim, keepdim=True)


def random_bases(b, d, r, dtype, seed=0):
    """A seeded U[0, 1) dictionary (b, d, r) with unit columns, as NMF draws it."""
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.rand(b, d, r, generator=g, dtype=dtype), dim=1)


def nmf_c_update(X, D, C):
    """Alg. 2, first line; C is (b, R, N)."""
    return C * (D.transpose(1, 2) @ X) / (D.transpose(1, 2) @ D @ C + EPS)


def nmf_d_update(X, D, C):
    """Alg. 2, second line."""
    return D * (X @ C.transpose(1, 2)) / (D @ C @ C.transpose(1, 2) + EPS)


def soft_assign(X, D, inv_t, eps=1e-12):
    """softmax(inv_t * cosine(D, X)) over R: (b, R, N)."""
    cos = F.normalize(D, dim=1, eps=EPS).transpose(1, 2) @ F.normalize(X, dim=1, eps=eps)
    return torch.softmax(inv_t * cos, dim=1)


def nmf_ref(X, Xg, D, K):
    """Alg. 2 as released: C = softmax(D^T X), K steps (C, then D) on X, one more C update on
    ``Xg`` (X for BPTT, X detached in the loop for the one-step gradient); returns D C."""
    C = torch.softmax(D.transpose(1, 2) @ X, dim=1)
    for _ in range(K):
        C = nmf_c_update(X, D, C)
        D = nmf_d_update(X, D, C)
    return D @ nmf_c_update(Xg, D, C)


def vq_ref(X, Xg, D, K, inv_t=100.0):
    """Alg. 1: D <- X C^T diag(C 1_n)^-1; final codes softmax(inv_t cosine(D, Xg))."""
    for _ in range(K):
        C = soft_assign(X, D, inv_t)
        D = X @ C.transpose(1, 2) / (C.sum(dim=2).unsqueeze(1) + EPS)
    return D @ soft_assign(Xg, D, inv_t, EPS)


def cd_ref(X, Xg, D, K, inv_t=100.0, beta=0.1):
    """Alg. 3: D <- normalize(X C^T); final codes (D^T D + beta I)^-1 D^T Xg."""
    for _ in range(K):
        C = soft_assign(X, D, inv_t)
        D = F.normalize(X @ C.transpose(1, 2), dim=1, eps=EPS)
    eye = torch.eye(D.shape[-1], dtype=D.dtype)
    return D @ torch.linalg.inv(D.transpose(1, 2) @ D + beta * eye) @ D.transpose(1, 2) @ Xg


REFS = {"NMF": nmf_ref, "CD": cd_ref, "VQ": vq_ref}


def perturb_norms(block):
    """Running statistics and affine parameters of every BatchNorm away from 0/1 (so a missed
    or doubly applied norm shows)."""
    for m in block.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)
