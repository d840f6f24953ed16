"""Table 3's counts: the FLOP counter against hand counts of the hams (paper Alg. 1-3), the
forward+backward / forward ratio of every module in a sane band (a grouped convolution's
backward counted right: torch's formula gives DMNet ~12x), memory, the interleaved table."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from projects.context_lab.context_lab import table3 as T

B, C, H, W, R, K = 1, 64, 16, 16, 8, 3


def hand_macs(kind):
    """One forward of the 'paper' block, d = C, n = H W (the code's NMF takes its initial codes
    from the first update's D^T X, so the paper's extra n d r is not run)."""
    n, d = H * W, C
    breads = 2 * C * d * n
    if kind == "NMF":
        ham = (
            K * (2 * n * d * R + 2 * n * R * R + 2 * d * R * R) + n * d * R + d * R * R + n * R * R
        )
    else:
        ham = K * 2 * n * d * R + (d * R * R + d * R * n if kind == "CD" else n * d * R)
    return breads + ham + d * R * n  # + the reconstruction D C


@pytest.mark.parametrize("key, kind", [("ham_nmf", "NMF"), ("ham_cd", "CD"), ("ham_vq", "VQ")])
def test_counted_macs_are_the_hand_count(key, kind):
    module = T.SPECS[key][1](C, R, K)
    assert T.count(module, torch.randn(B, C, H, W)) // 2 == hand_macs(kind)


def test_every_module_backward_is_counted_in_a_sane_band():
    """Every product differentiated: forward + backward = 3 forwards. One-step hams run their K
    steps without autograd and EMA its E/M steps: less than 3, more than 1."""
    x = torch.randn(B, C, H, W)
    one_step = ("ham_nmf", "ham_cd", "ham_vq", "ham_nmf_release")
    for key, (label, build, _) in T.SPECS.items():
        torch.manual_seed(0)
        module = build(C, R, K)
        with torch.no_grad():
            grad = torch.randn(module.eval()(x).shape)
        ratio = T.count(module, x, grad) / T.count(module, x)
        low = 1.0 if key == "ema" else 2.0 if key in one_step else 2.8
        assert low <= ratio <= 3.05, (label, ratio)


def test_a_grouped_convolution_backward_is_two_forwards():
    x = torch.randn(1, 16, 9, 9, requires_grad=True)
    w = torch.randn(16, 1, 3, 3, requires_grad=True)
    with T.FlopCount() as ours:
        y = F.conv2d(x, w, padding=1, groups=16)
        forward = ours.flops
        y.sum().backward()
    assert ours.flops == 3 * forward == 3 * 2 * 16 * 81 * 9
    with FlopCounterMode(display=False) as theirs:  # canary: torch's formula ignores groups
        F.conv2d(x, w, padding=1, groups=16).sum().backward()
    assert theirs.get_total_flops() > 5 * forward


def test_peak_memory_sees_a_temporary():
    assert T.peak_memory(lambda: torch.ones(2**20).sum(), torch.device("cpu")) >= 4 * 2**20


def test_table_interleaves_rounds_and_skips_large_pairwise_maps():
    result = T.measure(
        ["ham_nmf", "sa"], sizes=(8, 12), channels=16, rounds=3, max_pairwise_gb=1e-4
    )
    rows = {(r["key"], r["size"]): r for r in result["rows"]}
    assert "skipped" in rows[("sa", 12)] and len(rows[("sa", 8)]["train_ms"]) == 3
    assert rows[("ham_nmf", 12)]["params"] == 2 * 16 * 16 + 16 + 2 * 16  # 1x1 conv+bias, conv, BN
    assert rows[("ham_nmf", 8)]["infer_mib"] >= 0 and set(result["slopes"]) == {"ham_nmf"}
    assert "| Ham (NMF) | 8 |" in T.markdown(result) and "skipped" in T.markdown(result)
