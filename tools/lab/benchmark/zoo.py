"""The context modules of the benchmark, each built from (C, r, K): the rows of Table 3 (Geng et
al., ICLR 2021, Sec. 3.3, App. E.2) and more: hamseg's Hamburgers (one-step and BPTT; 'release';
HamHead's default evaluation), mmseg's, SA, DA, A^2, APC, DM, ACF, EMA, GC, Poly-NL and AttnConv
(Andreoli; both the lab's, tools/lab/models/). DA, APC and DM are built at Table 3's parameter
counts (see each row's config)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from mmcv.cnn import ContextBlock, ConvModule, NonLocal2d
from mmseg.models.decode_heads.apc_head import ACM
from mmseg.models.decode_heads.da_head import CAM, PAM
from mmseg.models.decode_heads.dm_head import DCM
from mmseg.models.decode_heads.ema_head import EMAModule
from mmseg.models.decode_heads.ham_head import Hamburger as MMSegHamburger
from torch import Tensor, nn

from hamseg.models import Hamburger
from hamseg.models.decompositions import EVAL_PROTOCOLS

from ..models import AttnConv, PolyNL
from .comparators import CooccurrentFeatures, DoubleAttention

BN = dict(type="BN", requires_grad=True)
RELU = dict(type="ReLU")

#: Table 3: params (M = 2**20), MACs (G), train / infer MB, train / infer ms; TITAN Xp.
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
#: Rows of Table 3 not measured here.
NOT_AVAILABLE = {"CC (CCNet)": "needs mmcv's compiled ops (mmcv-lite has none)"}


class Branches(nn.Module):
    """Branches on one input, summed (DANet's PAM + CAM) or concatenated (ACM, DCM, C / 4 each)."""

    def __init__(
        self, branches: list[nn.Module], concat: bool, merge: nn.Module | None = None
    ) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)
        self.concat = concat
        self.merge = merge or nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        outs = [branch(x) for branch in self.branches]
        return self.merge(torch.cat(outs, dim=1) if self.concat else outs[0] + outs[1])


class EMAContext(nn.Module):
    """EMANet's block as mmseg's EMAHead: 1x1 conv, EMA module, ReLU, 1x1 conv-BN, ReLU(x + .)."""

    def __init__(self, channels: int, num_bases: int, num_stages: int = 3) -> None:
        super().__init__()
        self.ema_mid_conv = ConvModule(channels, channels, 1, norm_cfg=None, act_cfg=None)
        self.ema_module = EMAModule(channels, num_bases, num_stages, momentum=0.1)
        self.ema_out_conv = ConvModule(channels, channels, 1, norm_cfg=BN, act_cfg=None)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.ema_module(self.ema_mid_conv(x)), inplace=True)
        return F.relu(x + self.ema_out_conv(out))


@dataclass
class Spec:
    """A row: ``key`` (``--modules``), ``label``, ``config``, ``build(C, r, K)``, ``ham`` ((type,
    variant), for the hand count), ``quadratic`` (N x N maps: the sweep skips large n),
    ``default`` (in the table without ``--modules``; AttnConv's eight N x N maps need ~33 GB at
    Table 3's size); ``paper``: its row of :data:`PAPER_TABLE3`."""

    key: str
    label: str
    config: str
    build: Callable[[int, int, int], nn.Module]
    ham: tuple[str, str] | None = None
    quadratic: bool = False
    default: bool = True
    paper: str | None = None


def _ham(
    kind: str, grad: str, variant: str = "paper", **options: int
) -> Callable[[int, int, int], nn.Module]:
    def build(c: int, r: int, k: int) -> nn.Module:
        cfg = dict(type=kind, S=1, R=r, train_steps=k, eval_steps=k, grad=grad, **options)
        if kind == "CD":
            cfg.update(inv_t=100.0, beta=0.1)
        return Hamburger(c, c, ham_cfg=cfg, variant=variant, norm_cfg=BN, act_cfg=RELU)

    return build


def _mmseg_ham(c: int, r: int, k: int) -> nn.Module:
    # LightHamHead's block; its NMF2D runs 7 eval steps by default, K here like ours
    kwargs = dict(MD_S=1, MD_R=r, train_steps=k, eval_steps=k, inv_t=1, rand_init=True)
    return MMSegHamburger(c, ham_kwargs=kwargs, norm_cfg=BN)


def _conv_bn_relu(c_in: int, c_out: int, k: int) -> nn.Module:
    return ConvModule(c_in, c_out, k, padding=k // 2, norm_cfg=BN, act_cfg=RELU)


def _da(c: int, r: int, k: int) -> nn.Module:
    # DANet's head runs a 3x3 conv-BN-ReLU (C -> C) before each attention (Table 3: 4.82M)
    pam = nn.Sequential(_conv_bn_relu(c, c, 3), PAM(c, max(c // 8, 1)))
    return Branches([pam, nn.Sequential(_conv_bn_relu(c, c, 3), CAM())], concat=False)


def _apc(c: int, r: int, k: int) -> nn.Module:
    # C/2 per ACM with fusion, the 2C concatenation merged by a 1x1 conv-BN-ReLU to C/2
    # (Table 3: 2.03M); GroupNorm: with batch 1, BN cannot normalise the pooled branch
    b = max(c // 2, 1)
    gn = dict(type="GN", num_groups=math.gcd(max(b // 2, 1), 32), requires_grad=True)
    acms = [ACM(s, True, c, b, None, gn, RELU) for s in (1, 2, 3, 6)]
    return Branches(acms, True, merge=_conv_bn_relu(4 * b, b, 1))


def _dm(c: int, r: int, k: int) -> nn.Module:
    # C per DCM with fusion (Table 3: 3.00M), concatenated
    return Branches([DCM(s, True, c, c, None, BN, RELU) for s in (1, 3, 5, 7)], True)


_HAM_DESC = dict(NMF="NMF, d=C, r, K", CD="CD (1/T=100, beta=0.1)", VQ="VQ (1/T=100)")


def _ham_rows(kind: str, desc: str) -> list[Spec]:
    one_step = Spec(
        key=f"ham_{kind.lower()}",
        label=f"Ham ({kind})",
        config=f"hamseg Hamburger 'paper', {desc}, one-step grad",
        build=_ham(kind, "one_step"),
        ham=(kind, "paper"),
        paper=f"Ham ({kind})" if kind in ("NMF", "CD") else None,
    )
    bptt = Spec(
        key=f"ham_{kind.lower()}_bptt",
        label=f"Ham ({kind}, BPTT)",
        config=f"as Ham ({kind}), gradient through all K steps",
        build=_ham(kind, "bptt"),
        ham=(kind, "paper"),
    )
    return [one_step, bptt]


_ROWS = [
    *(row for kind, desc in _HAM_DESC.items() for row in _ham_rows(kind, desc)),
    Spec(
        key="ham_nmf_eval12",
        label="Ham (NMF), 12-draw ensemble evaluation",
        config="as Ham (NMF), evaluated with hamseg's ensemble: the mean of 12 seeded draws "
        "(eval_seed=0, eval_draws=12; training is one draw, as Ham (NMF))",
        build=_ham("NMF", "one_step", **EVAL_PROTOCOLS["ensemble"]),
    ),
    Spec(
        key="ham_nmf_release",
        label="Ham (NMF, release V2)",
        config="hamseg Hamburger 'release' (cheese conv-BN-ReLU), NMF, one-step grad",
        build=_ham("NMF", "one_step", "release"),
        ham=("NMF", "release"),
    ),
    Spec(
        key="mmseg_ham",
        label="mmseg Hamburger (peer)",
        config="mmseg 1.2.2 LightHamHead's Hamburger, NMF2D r, K (eval K, not its default 7), BPTT",
        build=_mmseg_ham,
    ),
    Spec(
        key="sa",
        label="SA",
        config="mmcv NonLocal2d(C, reduction=1), embedded Gaussian, scaled",
        build=lambda c, r, k: NonLocal2d(c, reduction=1, use_scale=True, mode="embedded_gaussian"),
        quadratic=True,
        paper="SA",
    ),
    Spec(
        key="da",
        label="DA",
        config="mmseg DANet PAM(C, C/8) + CAM, each after DANet's 3x3 conv-BN-ReLU C -> C "
        "(mmseg's DAHead: pam_in_conv, cam_in_conv), summed",
        build=_da,
        quadratic=True,
        paper="DA",
    ),
    Spec(
        key="a2",
        label="A2",
        config="hamseg DoubleAttention(C, c_m = c_n = C): A^2-Net's gather and distribute, "
        "1x1 conv-BN back to C, skip",
        build=lambda c, r, k: DoubleAttention(c),
        paper="A2",
    ),
    Spec(
        key="apc",
        label="APC",
        config="mmseg APCNet ACM x4 (scales 1,2,3,6, fusion, GN), C/2 each, concatenated, "
        "1x1 conv-BN-ReLU 2C -> C/2",
        build=_apc,
        paper="APC",
    ),
    Spec(
        key="dm",
        label="DM",
        config="mmseg DMNet DCM x4 (filters 1,3,5,7, fusion), C each, concatenated",
        build=_dm,
        paper="DM",
    ),
    Spec(
        key="acf",
        label="ACF",
        config="hamseg CooccurrentFeatures(C): our reading of CFNet's ACF, co-occurrent "
        "probability softmax(phi^T psi) over C/2, aggregated rho, global prior, 1x1 conv-BN-ReLU",
        build=lambda c, r, k: CooccurrentFeatures(c),
        quadratic=True,
        paper="ACF",
    ),
    Spec(
        key="ema",
        label="EMA",
        config="mmseg EMANet: 1x1 conv, EMAModule(C, r bases, 3 stages), 1x1 conv-BN, skip",
        build=lambda c, r, k: EMAContext(c, r),
    ),
    Spec(
        key="gc",
        label="GC",
        config="mmcv ContextBlock(C, ratio 1/4) (GCNet)",
        build=lambda c, r, k: ContextBlock(c, 1 / 4),
    ),
    Spec(
        key="polynl",
        label="Poly-NL",
        config="hamseg PolyNL(C), Eq. 6 of Babiloni et al. 2021",
        build=lambda c, r, k: PolyNL(c),
    ),
    Spec(
        key="attnconv",
        label="AttnConv",
        config="hamseg AttnConv(C, 8 heads, D = D_v = 64, mu, 3x3 index heads), Andreoli Eq. 7-10",
        build=lambda c, r, k: AttnConv(c, 8, 64, 64),
        quadratic=True,
        default=False,
    ),
]
#: Every row by key, in table order.
SPECS = {s.key: s for s in _ROWS}
