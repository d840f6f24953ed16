"""Two rows of Table 3 that mmseg 1.2.2 does not ship, written here from their papers for the
cost comparison only (they are not decode heads): A^2's double attention block (Chen et al.,
NeurIPS 2018) and CFNet's aggregated co-occurrent feature module (Zhang et al., CVPR 2019).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from mmcv.cnn import ConvModule
from torch import Tensor, nn

BN = dict(type="BN", requires_grad=True)


class DoubleAttention(nn.Module):
    """A^2's double attention block (Chen et al. 2018, Eq. 1-4): gather, then distribute.

    From X (B, C, n): features A = phi(X) (c_m channels), gathering maps softmax_n(theta(X))
    (c_n maps, each a distribution over the n positions), G = A softmax_n(theta(X))^T, the c_n
    global descriptors; distribution weights softmax_c(rho(X)) (per position, over the c_n
    descriptors); Z = G softmax_c(rho(X)); out = X + BN(W Z), W a 1x1 conv c_m -> C.

    Args:
        channels: C, in and out.
        feat_channels: c_m (default C: Table 3's 1.01M at C = 512).
        num_descriptors: c_n (default C).
    """

    def __init__(
        self, channels: int, feat_channels: int | None = None, num_descriptors: int | None = None
    ) -> None:
        super().__init__()
        cm = feat_channels or channels
        cn = num_descriptors or channels
        self.features = nn.Conv2d(channels, cm, 1)
        self.gather = nn.Conv2d(channels, cn, 1)
        self.distribute = nn.Conv2d(channels, cn, 1)
        self.restore = ConvModule(cm, channels, 1, norm_cfg=BN, act_cfg=None)

    def forward(self, x: Tensor) -> Tensor:
        b, _, h, w = x.shape
        feats = self.features(x).flatten(2)  # (B, c_m, n)
        gather = F.softmax(self.gather(x).flatten(2), dim=2)  # (B, c_n, n), sums to 1 over n
        distribute = F.softmax(self.distribute(x).flatten(2), dim=1)  # (B, c_n, n), over c_n
        # (B, c_m, n) @ (B, c_n, n)^T -> (B, c_m, c_n): the global descriptors
        descriptors = torch.bmm(feats, gather.transpose(1, 2))
        # (B, c_m, c_n) @ (B, c_n, n) -> (B, c_m, n)
        z = torch.bmm(descriptors, distribute)
        return x + self.restore(z.view(b, -1, h, w))


class CooccurrentFeatures(nn.Module):
    """Our reading of CFNet's aggregated co-occurrent feature (ACF) module (Zhang et al. 2019):
    the co-occurrent probability of position j given position i, P = softmax_j(phi(x_i)^T
    psi(x_j)), aggregates the co-occurrent context rho(X); a global-pooling prior g = gamma(mean
    of X) is concatenated to the aggregate and a 1x1 conv-BN-ReLU maps the two back to C.

    The layer widths are not given in the Hamburger paper; ``channels // 2`` for phi, psi, rho
    and gamma gives Table 3's 0.75M at C = 512.

    Args:
        channels: C, in and out.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        half = max(channels // 2, 1)
        self.phi = nn.Conv2d(channels, half, 1)
        self.psi = nn.Conv2d(channels, half, 1)
        self.rho = nn.Conv2d(channels, half, 1)
        self.gamma = nn.Conv2d(channels, half, 1)
        self.out = ConvModule(2 * half, channels, 1, norm_cfg=BN, act_cfg=dict(type="ReLU"))

    def forward(self, x: Tensor) -> Tensor:
        b, _, h, w = x.shape
        query = self.phi(x).flatten(2)
        key = self.psi(x).flatten(2)  # (B, C/2, n) each
        # (B, C/2, n)^T @ (B, C/2, n) -> (B, n, n): row i, the probability of each j given i
        prob = F.softmax(torch.bmm(query.transpose(1, 2), key), dim=2)
        context = self.rho(x).flatten(2)  # (B, C/2, n)
        # (B, C/2, n) @ (B, n, n)^T -> (B, C/2, n): position i gathers sum_j P_ij rho(x_j)
        aggregate = torch.bmm(context, prob.transpose(1, 2)).view(b, -1, h, w)
        prior = self.gamma(x.mean(dim=(2, 3), keepdim=True)).expand(-1, -1, h, w)
        return self.out(torch.cat([aggregate, prior], dim=1))
