"""The context modules of the benchmark (the paper's Table 3 rows, and more), in = out = C.

Geng et al., "Is Attention Better Than Matrix Decomposition?" (ICLR 2021), Sec. 3.3, Table 3,
App. E.2. Every row builds one module from (C, r, K): hamseg's Hamburgers (NMF, CD and VQ, with
the one-step gradient and with BPTT, and the release's variant), mmseg's own Hamburger (the peer),
self-attention (mmcv's NonLocal2d), DANet, APCNet, DMNet, EMANet, GCNet and Poly-NL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from mmcv.cnn import ContextBlock, ConvModule, NonLocal2d
from mmseg.models.decode_heads.apc_head import ACM
from mmseg.models.decode_heads.da_head import CAM, PAM
from mmseg.models.decode_heads.dm_head import DCM
from mmseg.models.decode_heads.ema_head import EMAModule
from mmseg.models.decode_heads.ham_head import Hamburger as MMSegHamburger
from torch import Tensor, nn

from hamseg.models import Hamburger, PolyNL

BN = dict(type="BN", requires_grad=True)
RELU = dict(type="ReLU")

#: Table 3 of the paper: params (M = 2**20), MACs (G), train / infer memory (MB), train / infer
#: time (ms) on one 1x512x128x128 tensor, NVIDIA TITAN Xp.
PAPER_TABLE3 = {
    "SA": (1.00, 292.0, 5253, 2148, 242.0, 82.2),
    "DA": (4.82, 79.5, 2395, 2203, 72.6, 64.4),
    "A2": (1.01, 25.7, 326, 165, 22.9, 8.0),
    "APC": (2.03, 17.6, 458, 264, 26.5, 11.6),
    "DM": (3.00, 35.1, 557, 268, 65.7, 23.3),
    "ACF": (0.75, 79.5, 1380, 627, 71.0, 22.6),
    "Ham (CD)": (0.50, 16.2, 162, 102, 20.0, 13.0),
    "Ham (NMF)": (0.50, 17.6, 202, 98, 15.6, 7.7),
}
#: The input of Table 3: (B, C, H, W).
PAPER_SHAPE = (1, 512, 128, 128)


# Context modules assembled from mmseg / mmcv building blocks, in = out = C channels


class DualAttention(nn.Module):
    """DANet's dual attention: PAM(x) + CAM(x), mmseg's modules (DAHead sums the two branches).

    mmseg's DANet configs run PAM on 512 channels with ``pam_channels=64`` (C / 8).
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.pam = PAM(channels, max(channels // 8, 1))
        self.cam = CAM()

    def forward(self, x: Tensor) -> Tensor:
        return self.pam(x) + self.cam(x)


class PyramidContext(nn.Module):
    """Four branches of C / 4 channels concatenated back to C (APCNet's ACM or DMNet's DCM).

    mmseg's APCHead / DMHead concatenate their branches with the input and fuse them with a
    3x3 bottleneck of the head; here the branches are C / 4 wide so that their concatenation
    is the C-channel output (the pyramid-pooling layout), without the head's bottleneck.
    """

    def __init__(self, branches: list[nn.Module]) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([branch(x) for branch in self.branches], dim=1)


class EMAContext(nn.Module):
    """EMANet's context block as in mmseg's EMAHead: 1x1 conv, EMA module (EM attention, the
    bases' EM iterations without gradient), ReLU, 1x1 conv-BN, ReLU(x + .).

    It has the Hamburger's layout (lower bread, decomposition, upper bread, skip), which makes
    it the closest relative of Hamburger among mmseg's modules.
    """

    def __init__(self, channels: int, num_bases: int, num_stages: int = 3) -> None:
        super().__init__()
        self.ema_mid_conv = ConvModule(channels, channels, 1, norm_cfg=None, act_cfg=None)
        self.ema_module = EMAModule(channels, num_bases, num_stages, momentum=0.1)
        self.ema_out_conv = ConvModule(channels, channels, 1, norm_cfg=BN, act_cfg=None)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.ema_module(self.ema_mid_conv(x)), inplace=True)
        return F.relu(x + self.ema_out_conv(out))


# The module table


@dataclass
class Spec:
    """One row of the benchmark.

    Attributes:
        key: Short name (the key of :data:`SPECS`, ``--modules`` of the tool).
        label: Row label (Table 3 names where the paper has the row).
        config: What exactly is built, for the table.
        build: Builds the module for (C, R, K).
        paper: Key of :data:`PAPER_TABLE3` to compare against, if any.
        ham: (type, variant, grad) of a hamseg Hamburger, for the hand count.
        quadratic: Whether memory grows with n^2 (N x N attention maps): the sweep skips sizes
            whose n^2 maps would exceed ``max_pairwise_gb`` (see
            :func:`~hamseg.benchmark.sweep.run_sweep`).
    """

    key: str
    label: str
    config: str
    build: Callable[[int, int, int], nn.Module]
    paper: Optional[str] = None
    ham: Optional[tuple[str, str, str]] = None
    quadratic: bool = False


def _ham(kind: str, grad: str, variant: str = "paper") -> Callable[[int, int, int], nn.Module]:
    def build(c: int, r: int, k: int) -> nn.Module:
        cfg = dict(type=kind, S=1, R=r, train_steps=k, eval_steps=k, grad=grad)
        if kind == "CD":
            cfg.update(inv_t=100.0, beta=0.1)
        return Hamburger(c, c, ham_cfg=cfg, variant=variant, norm_cfg=BN, act_cfg=RELU)

    return build


def _mmseg_ham(c: int, r: int, k: int) -> nn.Module:
    # LightHamHead's block at the paper's setting; its NMF2D defaults to 7 eval steps, set to K
    # here so that both Hamburgers run the same arithmetic.
    kwargs = dict(MD_S=1, MD_R=r, train_steps=k, eval_steps=k, inv_t=1, rand_init=True)
    return MMSegHamburger(c, ham_kwargs=kwargs, norm_cfg=BN)


def _apc(c: int, r: int, k: int) -> nn.Module:
    # GroupNorm instead of BN: with batch 1, BN cannot normalise the 1x1 global-pooling branch
    # in train mode (one value per channel).
    b = max(c // 4, 1)
    gn = dict(type="GN", num_groups=math.gcd(max(b // 2, 1), 32), requires_grad=True)
    return PyramidContext([ACM(s, True, c, b, None, gn, RELU) for s in (1, 2, 3, 6)])


def _dm(c: int, r: int, k: int) -> nn.Module:
    b = max(c // 4, 1)
    return PyramidContext([DCM(s, False, c, b, None, BN, RELU) for s in (1, 3, 5, 7)])


def specs() -> list[Spec]:
    """All rows, in table order."""
    rows = [
        Spec(
            "ham_nmf",
            "Ham (NMF)",
            "hamseg Hamburger 'paper', NMF, d=C, r, K, one-step grad",
            _ham("NMF", "one_step"),
            paper="Ham (NMF)",
            ham=("NMF", "paper", "one_step"),
        ),
        Spec(
            "ham_nmf_bptt",
            "Ham (NMF, BPTT)",
            "as Ham (NMF), gradient through all K steps",
            _ham("NMF", "bptt"),
            ham=("NMF", "paper", "bptt"),
        ),
        Spec(
            "ham_cd",
            "Ham (CD)",
            "hamseg Hamburger 'paper', CD (1/T=100, beta=0.1), one-step grad",
            _ham("CD", "one_step"),
            paper="Ham (CD)",
            ham=("CD", "paper", "one_step"),
        ),
        Spec(
            "ham_cd_bptt",
            "Ham (CD, BPTT)",
            "as Ham (CD), gradient through all K steps",
            _ham("CD", "bptt"),
            ham=("CD", "paper", "bptt"),
        ),
        Spec(
            "ham_vq",
            "Ham (VQ)",
            "hamseg Hamburger 'paper', VQ (1/T=100), one-step grad",
            _ham("VQ", "one_step"),
            ham=("VQ", "paper", "one_step"),
        ),
        Spec(
            "ham_vq_bptt",
            "Ham (VQ, BPTT)",
            "as Ham (VQ), gradient through all K steps",
            _ham("VQ", "bptt"),
            ham=("VQ", "paper", "bptt"),
        ),
        Spec(
            "ham_nmf_release",
            "Ham (NMF, release V2)",
            "hamseg Hamburger 'release' (cheese conv-BN-ReLU), NMF, one-step grad",
            _ham("NMF", "one_step", "release"),
            ham=("NMF", "release", "one_step"),
        ),
        Spec(
            "mmseg_ham",
            "mmseg Hamburger (peer)",
            "mmseg 1.2.2 LightHamHead's Hamburger, NMF2D r, K (eval K, not its default 7), BPTT",
            _mmseg_ham,
        ),
        Spec(
            "sa",
            "SA",
            "mmcv NonLocal2d(C, reduction=1), embedded Gaussian, scaled",
            lambda c, r, k: NonLocal2d(c, reduction=1, use_scale=True, mode="embedded_gaussian"),
            paper="SA",
            quadratic=True,
        ),
        Spec(
            "da",
            "DA",
            "mmseg DANet PAM(C, C/8) + CAM",
            lambda c, r, k: DualAttention(c),
            paper="DA",
            quadratic=True,
        ),
        Spec(
            "apc",
            "APC",
            "mmseg APCNet ACM x4 (scales 1,2,3,6, fusion, GN), C/4 each, concatenated",
            _apc,
            paper="APC",
        ),
        Spec(
            "dm",
            "DM",
            "mmseg DMNet DCM x4 (filters 1,3,5,7), C/4 each, concatenated",
            _dm,
            paper="DM",
        ),
        Spec(
            "ema",
            "EMA",
            "mmseg EMANet: 1x1 conv, EMAModule(C, r bases, 3 stages), 1x1 conv-BN, skip",
            lambda c, r, k: EMAContext(c, r),
        ),
        Spec(
            "gc",
            "GC",
            "mmcv ContextBlock(C, ratio 1/4) (GCNet)",
            lambda c, r, k: ContextBlock(c, 1 / 4),
        ),
        Spec(
            "polynl",
            "Poly-NL",
            "hamseg PolyNL(C), Eq. 6 of Babiloni et al. 2021",
            lambda c, r, k: PolyNL(c),
        ),
    ]
    return rows


SPECS = {s.key: s for s in specs()}
#: Not measured: A2 (Double Attention) and ACF (CFNet) have no mmseg 1.2.2 module; CCNet's
#: criss-cross attention and PSANet need mmcv's compiled ops (not in mmcv-lite).
NOT_AVAILABLE = {
    "A2": "no module in mmseg 1.2.2",
    "ACF": "no module in mmseg 1.2.2",
    "CC (CCNet)": "needs mmcv's compiled ops (mmcv-lite has none)",
}
