"""Property-based tests (hypothesis) of the three hams over shapes, scales and step counts.

For any batch, group count S, channels, map size (1x1 and tall/thin maps included), rank R,
folding, train/eval mode and number of steps (0 included), and inputs scaled by 0, tiny
(1e-30 and a float32 subnormal), ordinary or huge (up to 1e15) factors:

- the output keeps the input's shape and dtype and is finite, and so is the input gradient;
- NMF's output is non-negative for non-negative input.

"Huge" stops at 1e15 for NMF: its multiplicative updates square the input's scale, so float32
overflows beyond about 1e19 whatever the implementation (soft VQ and CD normalise and stay
finite up to 1e35; one test covers that).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hamseg.models.decompositions import CD, NMF, VQ

SCALES = [0.0, 1e-40, 1e-30, 1e-6, 1.0, 1e3, 1e6, 1e15]
MAPS = st.one_of(
    st.tuples(st.integers(1, 9), st.integers(1, 9)),
    st.sampled_from([(1, 1), (1, 64), (64, 1), (2, 40), (40, 2)]),  # tall / thin
)
CASES = st.fixed_dictionaries(
    dict(
        batch=st.integers(1, 2),
        groups=st.integers(1, 2),
        group_channels=st.integers(1, 8),
        hw=MAPS,
        rank=st.integers(1, 6),
        train_steps=st.integers(0, 8),
        eval_steps=st.integers(0, 8),
        spatial=st.booleans(),
        training=st.booleans(),
        inv_t=st.sampled_from([1.0, 10.0, 100.0]),
        scale=st.sampled_from(SCALES),
        seed=st.integers(0, 2**16),
    )
)
PROFILE = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,  # the same examples on every CI run
    suppress_health_check=[HealthCheck.too_slow],
)


def run_case(cls, case: dict, dtype: torch.dtype = torch.float32):
    gen = torch.Generator().manual_seed(case["seed"])
    h, w = case["hw"]
    channels = case["groups"] * case["group_channels"]
    x = torch.randn(case["batch"], channels, h, w, generator=gen) * case["scale"]
    if cls is NMF:
        x = x.abs()  # NMF's input comes after a ReLU
    kwargs = dict(
        S=case["groups"],
        R=case["rank"],
        train_steps=case["train_steps"],
        eval_steps=case["eval_steps"],
        spatial=case["spatial"],
    )
    if cls is not NMF:
        kwargs["inv_t"] = case["inv_t"]
    ham = cls(**kwargs).train(case["training"])
    x = x.to(dtype).requires_grad_()
    torch.manual_seed(case["seed"])
    out = ham(x)
    out.float().sum().backward()
    return x, out


def check(cls, case: dict, dtype: torch.dtype = torch.float32) -> None:
    x, out = run_case(cls, case, dtype)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert torch.isfinite(out).all(), f"non-finite output for {case}"
    assert torch.isfinite(x.grad).all(), f"non-finite gradient for {case}"
    if cls is NMF:
        assert (out >= 0).all(), f"negative NMF output for {case}"


EDGE = dict(
    batch=1,
    groups=1,
    group_channels=4,
    rank=3,
    train_steps=6,
    eval_steps=6,
    spatial=True,
    training=True,
    inv_t=100.0,
    seed=0,
)


@PROFILE
@given(case=CASES)
@example(case=dict(EDGE, hw=(1, 1), scale=0.0))
@example(case=dict(EDGE, hw=(64, 1), scale=1e-40))
@example(case=dict(EDGE, hw=(1, 64), scale=1e15, spatial=False))
@example(case=dict(EDGE, hw=(1, 1), scale=1.0, group_channels=1, rank=6, training=False))
def test_nmf_finite_shape_and_nonnegative(case):
    check(NMF, case)


@PROFILE
@given(case=CASES)
@example(case=dict(EDGE, hw=(1, 1), scale=0.0))
@example(case=dict(EDGE, hw=(64, 1), scale=1e-40))
@example(case=dict(EDGE, hw=(1, 64), scale=1e15, spatial=False))
def test_cd_finite_and_shape(case):
    check(CD, case)


@PROFILE
@given(case=CASES)
@example(case=dict(EDGE, hw=(1, 1), scale=0.0))
@example(case=dict(EDGE, hw=(64, 1), scale=1e-40))
@example(case=dict(EDGE, hw=(1, 64), scale=1e15, spatial=False))
def test_vq_finite_and_shape(case):
    check(VQ, case)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(case=CASES, cls=st.sampled_from([NMF, CD, VQ]))
def test_bfloat16_inputs_keep_dtype_and_stay_finite(case, cls):
    check(cls, dict(case, scale=min(case["scale"], 1e6)), torch.bfloat16)


@pytest.mark.parametrize("cls", [CD, VQ])
def test_soft_clustering_survives_extreme_scales(cls):
    for scale in (1e25, 1e35):
        check(cls, dict(EDGE, hw=(8, 8), scale=scale))
