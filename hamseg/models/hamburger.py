"""The Hamburger block: lower bread, ham, (cheese,) upper bread and a skip connection.

Geng et al., "Is Attention Better Than Matrix Decomposition?", ICLR 2021, Sec. 2.2.1, Eq. 5-6,
Fig. 1. Two variants:

- ``'paper'`` (Eq. 6): Y = Z + BN(W_u M(W_l Z)); lower bread 1x1 conv (ReLU before NMF), upper
  bread 1x1 conv followed by the norm, no activation after the sum.
- ``'release'`` (the authors' "V2", used for the released VOC model): lower bread 1x1 conv with
  bias (ReLU before NMF), ham, "cheese" 1x1 conv-norm-act, upper bread 1x1 conv without bias and
  without norm, Y = act(Z + W_u cheese(M(W_l Z))).

Attribute names match the authors' checkpoint (``lower_bread.0``, ``cheese.conv/bn``,
``upper_bread``) so that its weights load 1:1.
"""

from __future__ import annotations

import copy
import math

import torch
from mmcv.cnn import ConvModule, build_activation_layer
from mmseg.registry import MODELS
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.instancenorm import _InstanceNorm

from .decompositions import MatrixDecomposition2D

__all__ = ["Hamburger"]

VARIANTS = ("paper", "release")
DEFAULT_NORM = dict(type="BN", requires_grad=True)
DEFAULT_ACT = dict(type="ReLU")


@MODELS.register_module()
class Hamburger(nn.Module):
    """Hamburger H(Z) = W_u M(W_l Z) with its skip connection (Eq. 5-6).

    Args:
        in_channels: Channels d_z of the input Z, and of the output.
        latent_channels: Channels d of the ham's input W_l Z. Defaults to ``in_channels`` (the
            paper and release use d = d_z = 512).
        ham_cfg: Config of the decomposition, built with ``mmseg.registry.MODELS``, e.g.
            ``dict(type='NMF', S=1, R=64, train_steps=6, eval_steps=6)`` (the default). With
            spatial folding D defaults to ``latent_channels // S``.
        variant: 'paper' or 'release' (see the module docstring).
        norm_cfg: Norm of the upper bread ('paper') or of the cheese ('release'); None for none.
        act_cfg: Activation of the cheese and after the skip sum ('release' only); None for
            none. The ReLU in front of NMF is not configurable (non-negativity).

    Raises:
        ValueError: On an unknown variant.
    """

    def __init__(
        self,
        in_channels: int,
        latent_channels: int | None = None,
        ham_cfg: dict | None = None,
        variant: str = "release",
        norm_cfg: dict | None = DEFAULT_NORM,
        act_cfg: dict | None = DEFAULT_ACT,
    ) -> None:
        super().__init__()
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        latent = latent_channels or in_channels
        norm_cfg, act_cfg = copy.deepcopy(norm_cfg), copy.deepcopy(act_cfg)
        self.variant = variant

        ham_cfg = dict(type="NMF") if ham_cfg is None else dict(ham_cfg)
        if ham_cfg.get("spatial", True):
            ham_cfg.setdefault("D", latent // ham_cfg.get("S", 1))
        ham: MatrixDecomposition2D = MODELS.build(ham_cfg)

        lower = [nn.Conv2d(in_channels, latent, 1)]
        if getattr(ham, "nonnegative", False):
            lower.append(nn.ReLU(inplace=True))  # NMF needs X >= 0 (Sec. 2.2.2)
        self.lower_bread = nn.Sequential(*lower)
        self.ham = ham

        if variant == "release":
            self.cheese = ConvModule(latent, latent, 1, norm_cfg=norm_cfg, act_cfg=act_cfg)
            self.upper_bread = nn.Conv2d(latent, in_channels, 1, bias=False)
            self.act = build_activation_layer(act_cfg) if act_cfg else nn.Identity()
        else:
            # Eq. 6: the BN of BN(H(Z)) is the norm of the upper bread; no activation.
            self.upper_bread = ConvModule(latent, in_channels, 1, norm_cfg=norm_cfg, act_cfg=None)
        self.init_weights()

    def init_weights(self) -> None:
        """Release init: conv weights N(0, sqrt(2 / (k*k*out_channels))), norms weight 1 bias 0.

        Conv biases keep PyTorch's default, as in the release. Also called by mmengine's
        ``BaseModule.init_weights`` of the head, which then does not reach the ConvModules here.
        """
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                nn.init.normal_(m.weight, 0.0, math.sqrt(2.0 / fan_out))
            elif isinstance(m, (_BatchNorm, _InstanceNorm, nn.GroupNorm, nn.LayerNorm)):
                if m.weight is not None:
                    nn.init.ones_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x: Tensor, bases: Tensor | None = None) -> Tensor:
        """Apply the block.

        The breads are computed as one matrix product per sample (a 1x1 convolution is
        W Z, (C_out, C_in) @ (C_in, n)), an eval-mode BatchNorm after a bread is folded into
        that product, the skip connection and the final ReLU are applied in place, and without
        autograd the ham writes its reconstruction over its own input. The arithmetic is that of
        the modules (outputs equal within float rounding); it only saves memory traffic. The
        plain module calls are used instead under autocast, for non-contiguous inputs and when a
        submodule has hooks.

        Args:
            x: Z, (B, in_channels, H, W).
            bases: Optional initial dictionary for the ham, (B*S, D, R).

        Returns:
            Y, same shape as ``x``.
        """
        if not self._fast_path_applies(x):
            out = self.ham(self.lower_bread(x), bases)
            if self.variant == "release":
                return self.act(x + self.upper_bread(self.cheese(out)))
            return x + self.upper_bread(out)

        lower = self.lower_bread[0]
        # W_l Z (+ bias), then the ReLU in front of NMF, in place on the product
        z = _pointwise(x, lower.weight, lower.bias, relu=len(self.lower_bread) > 1)
        first = self.cheese if self.variant == "release" else self.upper_bread
        folded = None if torch.is_grad_enabled() else self._low_rank_product(first, z)
        if folded is not None:
            # Inference: the bread after the ham multiplies the factors, (W D) C, and the
            # d x n reconstruction is never formed (MatrixDecomposition2D.factorize).
            dictionary, coef = self.ham.factorize(z, bases)
            weight, bias = folded
            # z is this call's own tensor and the factors no longer need it: the product after
            # the ham is written over it (when it has z's shape).
            spare = z if weight.shape[0] == z.shape[1] else None
            if self.variant == "paper":  # Z + BN(W_u D C)
                return _low_rank_pointwise(
                    weight, bias, dictionary, coef, z.shape, residual=x, out=spare
                )
            # conv-BN(-ReLU): _low_rank_product admits no other activation
            cheese = _low_rank_pointwise(
                weight, bias, dictionary, coef, z.shape, relu=first.with_activation, out=spare
            )
        else:
            # z is this call's own tensor: without autograd the ham may overwrite it.
            out = self.ham(z, bases, reuse_input=not torch.is_grad_enabled())
            if self.variant == "paper":
                return _conv_module(self.upper_bread, out, residual=x)  # Z + BN(W_u .)
            cheese = _conv_module(self.cheese, out)
        # act(Z + W_u cheese(.)): the skip connection is the product's addend
        relu = type(self.act) is nn.ReLU
        y = _pointwise(cheese, self.upper_bread.weight, residual=x, relu=relu)
        return y if relu else self.act(y)

    def _low_rank_product(
        self, module: ConvModule, z: Tensor
    ) -> tuple[Tensor, Tensor | None] | None:
        """The folded (weight, bias) of the conv-norm after the ham if it may multiply the ham's
        factors instead of their product: spatial folding, a float32/64 z, an eval BatchNorm
        (or no norm) and a ReLU (or no activation) after it; None otherwise."""
        if not self.ham.spatial or z.dtype not in (torch.float32, torch.float64):
            return None
        if module.with_activation and type(module.activate) is not nn.ReLU:
            return None
        return _fold_norm(module)

    #: Feature maps with fewer positions H * W take the plain module calls: the fast path
    #: saves nothing measurable there, and small maps (tests, toy models) then give results
    #: bit-identical to the module calls (CD and VQ with 1/T = 100 amplify float rounding).
    fast_path_min_positions: int = 1024

    def _fast_path_applies(self, x: Tensor) -> bool:
        """Whether :meth:`forward` may bypass the submodules' own forward calls."""
        if x.dim() != 4 or not x.is_contiguous() or not x.is_floating_point():
            return False
        if x.shape[2] * x.shape[3] < self.fast_path_min_positions:
            return False
        if torch.is_autocast_enabled(x.device.type) or _has_global_hooks():
            return False
        if len(self.lower_bread) > 1 and type(self.lower_bread[1]) is not nn.ReLU:
            return False
        modules = [self.lower_bread[0], self.upper_bread]
        if self.variant == "release":
            modules.append(self.cheese)
        for module in modules:
            conv = module.conv if isinstance(module, ConvModule) else module
            if not _is_plain_conv1x1(conv) or _has_hooks(module):
                return False
            if isinstance(module, ConvModule):
                if module.order != ("conv", "norm", "act") or module.with_explicit_padding:
                    return False
                if any(_has_hooks(m) for m in module.children()):
                    return False
        return True


def _has_hooks(module: nn.Module) -> bool:
    return bool(module._forward_hooks or module._forward_pre_hooks)


def _has_global_hooks() -> bool:
    hooks = nn.modules.module
    return bool(hooks._global_forward_hooks or hooks._global_forward_pre_hooks)


def _is_plain_conv1x1(conv: nn.Module) -> bool:
    """A 1x1 conv with stride 1, no padding, no dilation and one group."""
    return (
        type(conv) is nn.Conv2d
        and conv.kernel_size == (1, 1)
        and conv.stride == (1, 1)
        and conv.padding in ((0, 0), "valid")
        and conv.dilation == (1, 1)
        and conv.groups == 1
    )


def _pointwise(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    residual: Tensor | None = None,
    relu: bool = False,
) -> Tensor:
    """relu?(residual + W x + bias) for a 1x1 conv weight W, as one matrix product per sample.

    The additions and the ReLU act on the product's own result before it is viewed as
    (B, C_out, H, W): in place on the view they would make autograd copy the whole gradient
    (CopySlices). A residual is the addend of the product (``addmm``), so the skip connection
    costs no extra pass.

    Args:
        x: (B, C_in, H, W), contiguous.
        weight: (C_out, C_in) or (C_out, C_in, 1, 1).
        bias: (C_out,) or None.
        residual: (B, C_out, H, W) or None.
        relu: Apply a ReLU at the end.

    Returns:
        (B, C_out, H, W).
    """
    B, C, H, W = x.shape
    n = H * W
    w = weight.reshape(weight.shape[0], C)
    if B == 1:
        x2 = x.reshape(C, n)
        if residual is not None:
            # (C_out, n) + (C_out, C_in) @ (C_in, n) -> (C_out, n)
            out = torch.addmm(residual.reshape(-1, n), w, x2)
            if bias is not None:
                out = out.add_(bias.unsqueeze(1))  # addmm does not save its output
        elif bias is not None:
            # (C_out, 1) + (C_out, C_in) @ (C_in, n) -> (C_out, n)
            out = torch.addmm(bias.unsqueeze(1), w, x2)
        else:
            # (C_out, C_in) @ (C_in, n) -> (C_out, n)
            out = torch.mm(w, x2)
    else:
        x3 = x.reshape(B, C, n)
        if residual is not None:
            # (B, C_out, n) + (C_out, C_in) @ (B, C_in, n) -> (B, C_out, n)
            out = torch.baddbmm(residual.reshape(B, -1, n), w.expand(B, -1, -1), x3)
        else:
            # (C_out, C_in) @ (B, C_in, n) -> (B, C_out, n)
            out = torch.matmul(w, x3)
        if bias is not None:
            out = out.add_(bias.unsqueeze(1))  # the products do not save their outputs
    if relu:
        out = out.relu_()
    return out.view(B, w.shape[0], H, W)


def _fold_norm(module: ConvModule) -> tuple[Tensor, Tensor | None] | None:
    """(weight (C_out, C_in), bias) of a ConvModule's 1x1 conv with its eval-mode BatchNorm
    folded in; the conv's own if it has no norm; None if the norm cannot be folded.

    Folding (as mmcv's ``efficient_conv_bn_eval``): BN(W x + b) = (s W) x + s (b - mean) +
    beta with s = gamma / sqrt(var + eps), per output channel.
    """
    conv = module.conv
    if not module.with_norm:
        return conv.weight.reshape(conv.out_channels, -1), conv.bias
    norm = module.norm
    if not (
        isinstance(norm, _BatchNorm)
        and not norm.training
        and norm.track_running_stats
        and norm.running_mean is not None
    ):
        return None
    scale = torch.rsqrt(norm.running_var + norm.eps)
    if norm.weight is not None:
        scale = scale * norm.weight
    bias = -norm.running_mean * scale
    if conv.bias is not None:
        bias = bias + conv.bias * scale
    if norm.bias is not None:
        bias = bias + norm.bias
    # (C_out, 1) * (C_out, C_in): the BN scale on the rows of W
    return conv.weight.reshape(conv.out_channels, -1) * scale.unsqueeze(1), bias


def _conv_module(module: ConvModule, x: Tensor, residual: Tensor | None = None) -> Tensor:
    """``module(x) (+ residual)`` for a ConvModule 1x1 conv-norm-act, with an eval-mode
    BatchNorm folded into the product (:func:`_fold_norm`)."""
    act = module.activate if module.with_activation else None
    folded = _fold_norm(module)
    if folded is not None:
        weight, bias = folded
        relu = type(act) is nn.ReLU
        if act is None or relu:
            return _pointwise(x, weight, bias, residual=residual, relu=relu)
        y = act(_pointwise(x, weight, bias))
    else:
        conv = module.conv
        y = module.norm(_pointwise(x, conv.weight, conv.bias))  # new tensor: in place is safe
        if act is not None:
            y = act(y)
    if residual is None:
        return y
    # In place only on a norm's output: an activation may have saved its own output.
    return y.add_(residual) if act is None else y + residual


def _low_rank_pointwise(
    weight: Tensor,
    bias: Tensor | None,
    dictionary: Tensor,
    coef: Tensor,
    shape: torch.Size,
    residual: Tensor | None = None,
    relu: bool = False,
    out: Tensor | None = None,
) -> Tensor:
    """relu?(residual + W X_bar + bias) for X_bar = D C given by its factors, as (W D) C.

    With S channel groups, X_bar stacks S reconstructions D_s C_s (each D/S channels), and
    W X_bar = sum_s W_s D_s C_s = [W_1 D_1, ..., W_S D_S] [C_1; ...; C_S]: one product with
    inner size S r. Cost C_out (D r + S r n) MACs instead of C_out D n (and no d x n
    reconstruction is written). Without autograd only.

    Args:
        weight: (C_out, C) for the ham's C channels.
        bias: (C_out,) or None.
        dictionary: (B*S, C/S, r).
        coef: Codes transposed, (B*S, n, r).
        shape: (B, C, H, W) of the ham's input.
        residual: (B, C_out, H, W) or None.
        relu: Apply a ReLU at the end.
        out: Contiguous (B, C_out, H, W) memory to write the result into (none of the
            operands), or None to allocate it.

    Returns:
        (B, C_out, H, W).
    """
    B, _, H, W = shape
    BS, d, r = dictionary.shape
    S, n, c_out = BS // B, coef.shape[1], weight.shape[0]
    # (S, C_out, C/S) @ (B, S, C/S, r) -> (B, S, C_out, r)
    wd = torch.matmul(weight.reshape(c_out, S, d).transpose(0, 1), dictionary.view(B, S, d, r))
    wd = wd.transpose(1, 2).reshape(B, c_out, S * r)  # [W_1 D_1, ..., W_S D_S]
    codes = coef.view(B, S, n, r).transpose(2, 3).reshape(B, S * r, n)  # a view when S = 1
    if out is None:
        out = wd.new_empty(B, c_out, n)
    target = out.view(B, c_out, n)
    if residual is None:
        # (B, C_out, S r) @ (B, S r, n) -> (B, C_out, n)
        torch.bmm(wd, codes, out=target)
        if bias is not None:
            target.add_(bias.view(1, c_out, 1))
    else:
        # residual + bias in one pass, then the product accumulated onto it:
        # (B, C_out, n) + (B, C_out, S r) @ (B, S r, n) -> (B, C_out, n)
        res = residual.reshape(B, c_out, n)
        if bias is None:
            target.copy_(res)
        else:
            torch.add(res, bias.view(1, c_out, 1), out=target)
        target.baddbmm_(wd, codes)
    if relu:
        target.relu_()
    return target.view(B, c_out, H, W)
