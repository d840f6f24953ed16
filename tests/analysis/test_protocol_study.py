"""tools.lab.analysis.protocol_study: the evaluation protocols from cached backbone features."""

from __future__ import annotations

import os.path as osp

import pytest
import torch

from hamseg.cli import build_config
from hamseg.datasets.context_shapes import ContextShapesConfig, generate_context_shapes
from tests.helpers import DEMO_NMF, make_checkpoint, one_thread  # noqa: F401  (fixture)
from tools.lab.analysis.eval_variance import Evaluation, difference, interval
from tools.lab.analysis.protocol_study import ProtocolStudy

pytestmark = pytest.mark.usefixtures("one_thread")


def test_interval_and_difference_by_hand():
    got = interval([1.0, 2.0, 3.0])  # t(0.975, 2) = 4.3027: 4.3027 * 1 / sqrt(3)
    assert (got.mean, got.std, got.n) == (2.0, 1.0, 3)
    assert got.half_width == pytest.approx(2.4841, abs=1e-4)
    assert interval([5.0]).text() == "5.00 (n = 1)"
    # Welch: a = [1, 3] (var 2), b = [0, 0, 3] (var 3); se^2 = 2/2 + 3/3 = 2, dof = 4 / (1 + 0.5)
    diff = difference([1.0, 3.0], [0.0, 0.0, 3.0])
    assert diff.mean == pytest.approx(1.0) and diff.std == pytest.approx(2**0.5)
    from scipy.stats import t

    assert diff.half_width == pytest.approx(t.ppf(0.975, 4 / 1.5) * 2**0.5)


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> ProtocolStudy:
    """The demo HamHead-NMF (release variant: the cheese's BN and the align's BN follow the ham)
    with random weights, 3 val and 4 train images of 32 x 32, two draws per ensemble."""
    root = tmp_path_factory.mktemp("study")
    data = str(root / "cs")
    generate_context_shapes(data, ContextShapesConfig(size=32, num_train=4, num_val=3), False)
    options = {
        "data_root": data,
        "model.decode_head.ham_cfg.eval_draws": 2,
        "default_hooks.visualization.draw": False,
        "test_dataloader.num_workers": 0,
        "test_dataloader.persistent_workers": False,
        "test_dataloader.batch_size": 2,
    }
    cfg = build_config(DEMO_NMF, options, str(root / "work"))
    return ProtocolStudy(Evaluation(cfg, make_checkpoint(str(root / "c.pth"))), train_images=3)


def test_cached_features_give_the_test_loops_miou(study):
    """The config's protocol (eval_seed 0, 2 draws) from the cached features equals the whole
    test loop's mIoU; 2 of the 4 training images are kept (batches of 2, at least 3)."""
    assert study.ensemble([0], draws=2) == [study.reference]
    assert len(study.val) == 2 and sum(len(s) for _, s in study.train) == 4


def test_paper_runs_differ_and_repeat_with_their_seeds_the_ensemble_does_not_move(study):
    runs = study.paper(3, seed=10)
    assert len(set(runs)) > 1  # a new dictionary per image and forward: runs differ
    assert study.paper(3, seed=10) == runs  # run i is seeded with seed + i
    assert study.ensemble([0, 0], draws=2) == [study.reference] * 2
    assert study.ensemble([1], draws=2) != [study.reference]  # another seed, other draws


def test_the_logits_ensemble_of_one_draw_is_that_draw(study):
    assert study.logits_ensemble([3], draws=1) == study.ensemble([3], draws=1)
    assert study.logits_ensemble([3], draws=2) != study.ensemble([3], draws=2)


def test_norms_after_the_ham_are_reestimated_and_restored(study):
    head = study.head
    cheese, align = head.hamburger.cheese.bn, head.align.bn
    before = {n: v.clone() for n, v in head.state_dict().items()}
    with study.norms_reestimated(0, draws=2) as count:
        assert count == 2
        assert not torch.equal(cheese.running_var, before["hamburger.cheese.bn.running_var"])
        assert int(cheese.num_batches_tracked) == len(study.train)  # the cumulative mean
        reestimated = study.ensemble([0], draws=2)
    after = head.state_dict()
    assert all(torch.equal(after[n], v) for n, v in before.items())
    assert cheese.momentum == align.momentum == 0.1 and not cheese.training
    assert reestimated != [study.reference]


def test_the_ensemble_lowers_the_variance_reaching_the_cheese(study):
    paper, ensemble = study.input_variance_ratio(None), study.input_variance_ratio(0, draws=2)
    assert 0 < ensemble < paper
    assert osp.basename(DEMO_NMF).startswith("hamhead-nmf")
