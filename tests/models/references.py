"""Shared pieces of the model tests: seeded dictionaries, perturbed norms, a plain block."""

import torch
import torch.nn.functional as F
from torch import nn


def random_bases(b, d, r, dtype, seed=0):
    """A seeded U[0, 1) dictionary (b, d, r) with unit columns, as NMF draws it."""
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.rand(b, d, r, generator=g, dtype=dtype), dim=1)


def perturb_norms(block):
    """Running statistics and affine parameters of every BatchNorm away from 0/1 (so a missed
    or doubly applied norm shows)."""
    for m in block.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)


def reference_block(block, x, bases):
    """Hamburger.forward of a full block written with the submodules' own forward calls
    (Eq. 6 / release V2)."""
    out = block.ham(block.lower_bread(x), bases)
    if block.variant == "release":
        return block.act(x + block.upper_bread(block.cheese(out)))
    return x + block.upper_bread(out)
