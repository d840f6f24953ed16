"""The [speed] targets, evaluated on given rows."""

from __future__ import annotations

from hamseg.benchmark.targets import evaluate_targets
from hamseg.benchmark.zoo import PAPER_SHAPE


def test_targets_are_evaluated():
    rows = {
        "ham_nmf": dict(
            infer_x_floor=1.1,
            infer_ms=11.0,
            infer_floor_ms=10.0,
            train_ms=40.0,
            train_mem_mb=10.0,
            params=525_824,
            macs=17.55e9,
        ),
        "mmseg_ham": dict(train_ms=100.0, train_mem_mb=20.0),
        "sa": dict(train_ms=300.0),
        "ham_cd": dict(params=525_824 + 2**20 // 100, macs=17.1e9),
    }
    targets = {t["target"]: t for t in evaluate_targets(rows, PAPER_SHAPE)}
    assert targets["Ham (NMF) inference <= 1.2x compute floor"]["passed"]  # 1.1
    assert targets["Ham (NMF) fwd+bwd <= 0.5x mmseg Hamburger fwd+bwd"]["passed"]  # 0.4
    assert targets["Ham (NMF) fwd+bwd peak memory below mmseg Hamburger's"]["passed"]
    assert not targets["Ham (NMF) fwd+bwd >= 10x faster than SA"]["passed"]  # 7.5x
    assert targets["Ham (NMF) params 0.50M"]["passed"]
    assert not targets["Ham (CD) params 0.50M"]["passed"]  # 0.51M
    assert targets["Ham (NMF) MACs within 5% of 17.6G"]["passed"]
    assert not targets["Ham (CD) MACs within 5% of 16.2G"]["passed"]  # +5.6%
    rows["ham_nmf"]["infer_x_floor"] = 1.25
    first = evaluate_targets(rows, PAPER_SHAPE)[0]
    assert first["value"] == 1.25 and not first["passed"]
    assert len(evaluate_targets(rows, (1, 8, 4, 4))) == 4  # no paper rows off-setting
