"""Attention as content-based convolution: bi-affine attention heads plus 3x3 shift heads.

Andreoli, "Convolution, attention and structure embedding" (NAVER LABS Europe, 2019/2020): with
basis A_k (M, N) (input node m, output node n) and parameter Theta_k (P, Q), a convolution maps x
(M, P) to y = sum_k A_k^T x Theta_k (Eq. 4, Eq. 7). Nodes: the N = M = H * W positions of a
(B, C, H, W) map, P = Q = C. Content heads are self-attention (x' = y' = x, Def. 4) with the
bi-affine mechanism of Def. 5, Eq. 8, factorised as in the Transformer (Sec. 3.3): Lambda_k =
Lambda_k^key Lambda_k^query^T (Eq. 9, rank D), Theta_k = Theta_k^value Theta_k^O^T (Eq. 10, rank
D_v). Index heads are the 9 shift matrices A_d, d in {-1, 0, 1}^2 (Def. 1, zero padding) with full
C x C Theta_d: their sum is a 3x3 convolution and is computed as one (Sec. 1.4).

Softmax axis (Def. 3, Sec. 3.2-3.3): column-wise. Column A_k[:, n] is normalised over the input
nodes m for each output node n, so y_n = sum_m A_k[m, n] x_m Theta_k (the a^T x of Eq. 7) is a
convex combination. The nu term 1_M (x nu_k)^T of Eq. 8 depends on n only, is constant along each
column and cancels in the softmax (Sec. 3.2's remark), as xi_k does; mu_k (a score per m) does not.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from mmseg.registry import MODELS
from torch import Tensor, nn


def window_mask(h: int, w: int, window: int, device: torch.device | None = None) -> Tensor:
    """Log-domain mask H (Def. 3), (N, N) indexed [m, n]: 0 where input node m and output node n
    are at most ``window`` apart in both grid coordinates, -inf elsewhere (N = h * w, row-major)."""
    node = torch.arange(h * w, device=device)
    r = node // w
    c = node % w  # grid coordinates of each node, (N,)
    near = ((r[:, None] - r).abs() <= window) & ((c[:, None] - c).abs() <= window)
    return torch.zeros(near.shape, device=device).masked_fill(~near, float("-inf"))


@MODELS.register_module()
class AttnConv(nn.Module):
    """y = sum_k A_k^T x Theta_k over K content heads (Eq. 7-10) and 9 shift heads (Def. 1).

    Args:
        in_channels: C, channels of x and of y.
        num_heads: K, content heads (0: index heads only).
        key_dim: D, the rank of Lambda_k (Eq. 9). The bilinear term is scaled by 1/sqrt(D) as in
            the Transformer's scaled dot product (Eq. 8 has no scale; it folds into Lambda_k).
        value_dim: D_v, the rank of Theta_k (Eq. 10); defaults to D.
        with_mu, with_nu, with_xi: learn the affine terms of Eq. 8 (mu: a score per input node,
            nu: per output node, xi: a constant), zero at init. nu and xi cancel in the column
            softmax (module docstring): they are kept for Def. 5, their gradient is zero.
        window: None for global attention; w: mask H = -inf where nodes are more than w apart in
            a grid coordinate (:func:`window_mask`, built for each input's H, W).
        index_heads: add the 9 shift heads of a 3x3 grid.
    """

    def __init__(
        self,
        in_channels: int,
        num_heads: int = 8,
        key_dim: int = 64,
        value_dim: int | None = None,
        with_mu: bool = True,
        with_nu: bool = False,
        with_xi: bool = False,
        window: int | None = None,
        index_heads: bool = True,
    ) -> None:
        super().__init__()
        value_dim = key_dim if value_dim is None else value_dim
        if min(in_channels, key_dim, value_dim) < 1 or num_heads < 0 or (window or 0) < 0:
            raise ValueError("need in_channels, key_dim, value_dim >= 1 and num_heads, window >= 0")
        if num_heads == 0 and not index_heads:
            raise ValueError("AttnConv needs content heads (num_heads > 0) or index_heads=True")
        c = in_channels
        k = num_heads
        self.in_channels = c
        self.num_heads = k
        self.window = window
        self.scale = key_dim**-0.5
        # Stacks over the heads, [W_1 ... W_K] as (C, K, E), as the paper's Theta^O (Sec. 3.3)
        self.lambda_key = nn.Parameter(torch.empty(c, k, key_dim))  # Lambda_k^key, (C, D) each
        self.lambda_query = nn.Parameter(torch.empty(c, k, key_dim))  # Lambda_k^query, (C, D)
        self.theta_value = nn.Parameter(torch.empty(c, k, value_dim))  # Theta_k^value, (C, D_v)
        self.theta_out = nn.Parameter(torch.empty(c, k, value_dim))  # Theta_k^O, (C, D_v)
        self.mu = nn.Parameter(torch.zeros(c, k, 1)) if with_mu else None  # mu_k, (C, 1)
        self.nu = nn.Parameter(torch.zeros(c, k, 1)) if with_nu else None  # nu_k, (C, 1)
        self.xi = nn.Parameter(torch.zeros(k, 1, 1)) if with_xi else None  # xi_k, (K, 1, 1)
        # Theta_d, (3, 3, C, C) indexed [d_row + 1, d_col + 1, p, q]
        self.theta_index = nn.Parameter(torch.empty(3, 3, c, c)) if index_heads else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every factor N(0, 1 / fan_in): fan_in C, K D_v for Theta^O, 9 C for Theta_d."""
        c, k, dv = self.theta_out.shape
        with torch.no_grad():
            for p in (self.lambda_key, self.lambda_query, self.theta_value):
                p.normal_(0.0, c**-0.5)
            self.theta_out.normal_(0.0, max(k * dv, 1) ** -0.5)
            if self.theta_index is not None:
                self.theta_index.normal_(0.0, (9 * c) ** -0.5)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """Apply Eq. 7 over all heads.

        Args:
            x: (B, C, H, W), the main and the auxiliary inputs x = x' = y'.
            mask: Optional log-domain mask H (Def. 3), (N, N) indexed [m, n], values in {-inf, 0}
                (every column needs a 0); added to the window's mask if both are set.

        Returns:
            y, (B, C, H, W).
        """
        b, c, h, w = x.shape
        theta = self.theta_index
        # Def. 1: y_s = sum_d x_{s-d} Theta_d, a cross-correlation reading tap 1 - d, so the
        # (C_out, C_in, 3, 3) kernel is W[q, p, 1 - d] = Theta_d[p, q]
        y = 0 if theta is None else F.conv2d(x, theta.flip(0, 1).permute(3, 2, 0, 1), padding=1)
        if self.num_heads == 0:
            return y
        nodes = x.flatten(2).transpose(1, 2)  # x, (B, N, C)

        def per_head(stack: Tensor) -> Tensor:  # x W_k for every k, (B, K, N, E)
            # (B, N, C) @ (C, K E) -> (B, N, K E), then split into heads
            return (nodes @ stack.flatten(1)).unflatten(-1, stack.shape[1:]).transpose(1, 2)

        # x Lambda_k^query / sqrt(D), x Lambda_k^key, x Theta_k^value: (B, K, N, D or D_v)
        queries = per_head(self.lambda_query) * self.scale
        keys = per_head(self.lambda_key)
        values = per_head(self.theta_value)
        scores = queries @ keys.transpose(-1, -2)  # A_k^T [n, m]: (B,K,N,D) @ (B,K,D,N)->(B,K,N,N)
        if self.mu is not None:  # (x mu_k) 1^T: a score per m, a row (B, K, 1, N) of A_k^T
            scores = scores + per_head(self.mu).transpose(-1, -2)
        if self.nu is not None:  # 1 (x nu_k)^T: a score per n, constant along m, (B, K, N, 1)
            scores = scores + per_head(self.nu)
        if self.xi is not None:
            scores = scores + self.xi
        if self.window is not None:
            mask = window_mask(h, w, self.window, x.device) + (0 if mask is None else mask)
        if mask is not None:
            scores = scores + mask.to(scores.dtype).T  # H^T, (N, N) [n, m]
        attn = scores.softmax(dim=-1)  # A_k^T: column-wise softmax of A_k, over m for each n
        heads = attn @ values  # h_k = A_k^T x Theta_k^value: (B,K,N,N) @ (B,K,N,D_v)->(B,K,N,D_v)
        # sum_k h_k Theta_k^O^T = [h_1 ... h_K] Theta^O^T: (B, N, K D_v) @ (K D_v, C) -> (B, N, C)
        out = heads.transpose(1, 2).flatten(2) @ self.theta_out.flatten(1).T
        return y + out.transpose(1, 2).reshape(b, c, h, w)
