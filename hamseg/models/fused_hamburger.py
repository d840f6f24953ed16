"""The fused inference path of the Hamburger block: the same arithmetic, less memory traffic.

:class:`~hamseg.models.Hamburger` computes act(Z + after(M(before(Z)))) (Eq. 5-6). This module
computes the same thing without the submodules' own forward calls:

- every 1x1 convolution is one matrix product per sample (W Z: (C_out, C_in) @ (C_in, n)), an
  eval-mode BatchNorm after it folded into W and its bias, a ReLU after it applied in place on
  the product's result, the skip connection Z the addend of the last product;
- without autograd the ham writes its reconstruction over its own input, and when the conv after
  the ham can multiply the factors, (W D) C replaces W (D C): the d x n reconstruction is never
  formed (:meth:`MatrixDecomposition2D.factorize`).

Outputs and gradients equal the module calls within float rounding. The path applies only where
it is exact (:func:`applies`): a contiguous float map with at least
``Hamburger.fast_path_min_positions`` positions, no autocast, no hooks anywhere in the block,
plain 1x1 convs, and a block with all three parts (Table 2's ablated blocks take the module
calls). A block states its layout through ``layout()`` (:class:`Layout`), so a new layout of the
block reuses this path as is.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
from mmcv.cnn import ConvModule
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from hamseg.models.tracing import is_tracing

from .decompositions import MatrixDecomposition2D

__all__ = ["Layout", "applies", "forward", "hooked", "is_plain_conv1x1"]


class Layout(NamedTuple):
    """A Hamburger block as the fused path reads it: Y = act(Z + after(M(before(Z)))).

    Attributes:
        before: Modules applied to Z before the ham, in order (1x1 ``nn.Conv2d``, 1x1
            ``ConvModule`` conv-norm-act, ``nn.ReLU``; ``nn.Identity`` is skipped).
        ham: The decomposition M, or None for a block without ham.
        after: Modules applied to the ham's output, in order (same kinds); the last one's
            output is added to Z.
        act: Applied to the sum (``nn.Identity`` for none).
    """

    before: Sequence[nn.Module]
    ham: MatrixDecomposition2D | None
    after: Sequence[nn.Module]
    act: nn.Module


#: One linear step of the block: a 1x1 conv (``nn.Conv2d`` or ``ConvModule``) and the activation
#: that follows it (the ConvModule's own, a separate ``nn.ReLU``, or None).
_Unit = tuple[nn.Module, nn.Module | None]


def applies(block: nn.Module, x: Tensor) -> bool:
    """Whether :func:`forward` computes ``block(x)`` exactly (within float rounding).

    Args:
        block: A module with ``layout()`` (:class:`Layout`) and ``fast_path_min_positions``.
        x: The block's input Z.
    """
    if x.dim() != 4 or not x.is_contiguous() or not x.is_floating_point() or is_tracing():
        return False  # a trace or an export records the module calls (no in-place writes)
    if x.shape[2] * x.shape[3] < block.fast_path_min_positions:
        return False
    if torch.is_autocast_enabled(x.device.type) or hooked(block, itself=False):
        return False  # a hook on any submodule must fire
    layout = block.layout()
    before, after = _units(layout.before), _units(layout.after)
    # A unit before the ham makes z this call's own tensor (the ham may overwrite it); the
    # skip connection is the addend of a last unit without an activation of its own.
    return layout.ham is not None and bool(before) and bool(after) and after[-1][1] is None


def forward(block: nn.Module, x: Tensor, bases: Tensor | None = None) -> Tensor:
    """``block(x, bases)`` by matrix products (see the module docstring); only where
    :func:`applies` is true.

    Args:
        block: As for :func:`applies`.
        x: Z, (B, C, H, W), contiguous.
        bases: Optional initial dictionary for the ham, (B*S, D, R).

    Returns:
        Y, same shape as ``x``.
    """
    layout = block.layout()
    before, after = _units(layout.before), _units(layout.after)
    z = x
    for unit in before:
        z = _apply(unit, z)  # W_l Z (+ bias), the ReLU in front of NMF in place
    relu_out = type(layout.act) is nn.ReLU
    ham, first, rest = layout.ham, after[0], after[1:]
    folded = None if torch.is_grad_enabled() else _low_rank_weights(ham, first, z)
    if folded is not None:
        # Inference: the conv after the ham multiplies the factors, (W D) C, and the d x n
        # reconstruction is never formed (MatrixDecomposition2D.factorize).
        dictionary, coef = ham.factorize(z, bases)
        weight, bias = folded
        # z is this call's own tensor and the factors no longer need it: the product after the
        # ham is written over it (when it has z's shape).
        spare = z if weight.shape[0] == z.shape[1] else None
        if not rest:  # e.g. 'paper': Z + BN(W_u D C)
            y = _low_rank_pointwise(
                weight, bias, dictionary, coef, z.shape, residual=x, relu=relu_out, out=spare
            )
            return y if relu_out else layout.act(y)
        # e.g. the release's cheese, conv-BN(-ReLU): _low_rank_weights admits no other act
        y = _low_rank_pointwise(
            weight, bias, dictionary, coef, z.shape, relu=first[1] is not None, out=spare
        )
    else:
        # z is this call's own tensor: without autograd the ham may overwrite it.
        y = ham(z, bases, reuse_input=not torch.is_grad_enabled())
        rest = after
    for unit in rest[:-1]:
        y = _apply(unit, y)
    # act(Z + W y): the skip connection is the last product's addend
    y = _apply(rest[-1], y, residual=x, relu=relu_out)
    return y if relu_out else layout.act(y)


def hooked(module: nn.Module, itself: bool = True) -> bool:
    """Whether a forward (pre-)hook would fire in ``module``'s forward: a global one, or one
    on any of its submodules (and on ``module`` itself if ``itself``). A path that bypasses
    the submodules' own forward calls must not run then."""
    hooks = nn.modules.module
    if hooks._global_forward_hooks or hooks._global_forward_pre_hooks:
        return True
    return any(
        m._forward_hooks or m._forward_pre_hooks
        for m in module.modules()
        if itself or m is not module
    )


def is_plain_conv1x1(conv: nn.Module) -> bool:
    """Whether ``conv`` is a plain ``nn.Conv2d``: 1x1, stride 1, no padding, no dilation, one
    group."""
    return (
        type(conv) is nn.Conv2d
        and conv.kernel_size == (1, 1)
        and conv.stride == (1, 1)
        and conv.padding in ((0, 0), "valid")
        and conv.dilation == (1, 1)
        and conv.groups == 1
    )


def _units(modules: Sequence[nn.Module]) -> list[_Unit] | None:
    """``modules`` as a chain of 1x1 conv units, or None if some module is not one of them
    (a norm or an activation on its own, a 3x3 conv, a ReLU after an activation, ...)."""
    units: list[_Unit] = []
    for module in modules:
        if type(module) is nn.Identity:
            continue
        if type(module) is nn.ReLU:
            if not units or units[-1][1] is not None:
                return None
            units[-1] = (units[-1][0], module)
        elif is_plain_conv1x1(module):
            units.append((module, None))
        elif (
            isinstance(module, ConvModule)
            and is_plain_conv1x1(module.conv)
            and module.order == ("conv", "norm", "act")
            and not module.with_explicit_padding
        ):
            units.append((module, module.activate if module.with_activation else None))
        else:
            return None
    return units


def _fold_norm(module: nn.Module) -> tuple[Tensor, Tensor | None] | None:
    """(weight (C_out, C_in), bias) of a unit's 1x1 conv with an eval-mode BatchNorm folded in;
    the conv's own if it has no norm; None if the norm cannot be folded.

    Folding (as mmcv's ``efficient_conv_bn_eval``): BN(W x + b) = (s W) x + s (b - mean) +
    beta with s = gamma / sqrt(var + eps), per output channel.
    """
    conv = module.conv if isinstance(module, ConvModule) else module
    if not isinstance(module, ConvModule) or not module.with_norm:
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


def _low_rank_weights(
    ham: MatrixDecomposition2D, unit: _Unit, z: Tensor
) -> tuple[Tensor, Tensor | None] | None:
    """The folded (weight, bias) of the unit after the ham if it may multiply the ham's factors
    instead of their product: spatial folding, a float32/64 z, an eval BatchNorm (or no norm)
    and a ReLU (or no activation) after it; None otherwise."""
    if not ham.spatial or z.dtype not in (torch.float32, torch.float64):
        return None
    if unit[1] is not None and type(unit[1]) is not nn.ReLU:
        return None
    return _fold_norm(unit[0])


def _apply(unit: _Unit, x: Tensor, residual: Tensor | None = None, relu: bool = False) -> Tensor:
    """relu?(act(conv-norm(x)) + residual) for a unit, an eval-mode BatchNorm folded into the
    product (:func:`_fold_norm`). ``residual`` and ``relu`` only for a unit without activation."""
    module, act = unit
    folded = _fold_norm(module)
    if folded is not None and (act is None or type(act) is nn.ReLU):
        weight, bias = folded
        return _pointwise(x, weight, bias, residual=residual, relu=relu or act is not None)
    if folded is not None:
        y = act(_pointwise(x, *folded))
    else:
        conv = module.conv
        y = module.norm(_pointwise(x, conv.weight, conv.bias))  # new tensor: in place is safe
        if act is not None:
            y = act(y)
    if residual is not None:
        # In place only on a norm's output: an activation may have saved its own output.
        y = y.add_(residual) if act is None else y + residual
    return y.relu_() if relu else y


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
            # (B, C_out, C_in) @ (B, C_in, n) -> (B, C_out, n); not matmul(w, x3), whose
            # backward folds B into the rows of one product: transposed copies of x and of
            # the gradient
            out = torch.bmm(w.expand(B, -1, -1), x3)
        if bias is not None:
            out = out.add_(bias.unsqueeze(1))  # the products do not save their outputs
    if relu:
        out = out.relu_()
    return out.view(B, w.shape[0], H, W)


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
