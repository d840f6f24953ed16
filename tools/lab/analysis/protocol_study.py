"""The evaluation protocols of a random-init ham compared on one checkpoint, head only
(docs/evaluation.md, "What each protocol gives on the demo"): the backbone runs once per image
and its features are kept, the head and its ham's draws run as often as a measurement needs.
The mIoU equals the test loop's for the same draws (tested).

Protocols (``hamseg.models.decompositions.EVAL_PROTOCOLS``): the paper's, a new dictionary for
every image at every forward, run N times; hamseg's ensemble, the mean of the reconstructions
of K seeded dictionaries. Variants of the ensemble measured against them: the mean of the K
draws' logits instead of their reconstructions, and the ensemble after the batch norms behind
the ham were re-estimated under it on training images (their running statistics were collected
under single draws in training).
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence

import torch
from mmengine.logging import MMLogger
from mmengine.runner import Runner
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from .eval_variance import Evaluation, hams, set_eval_draws

#: Logits (B, C, H, W) of a batch at the input size, from its features and image metas.
LogitsFn = Callable[[list[Tensor], list[dict]], Tensor]


def cache_features(model: nn.Module, dataloader: Iterable, limit: int | None = None) -> list:
    """``[(features, data_samples), ...]`` of the dataloader's batches (eval mode, no gradient),
    up to ``limit`` images."""
    batches = []
    seen = 0
    with torch.no_grad():
        for batch in dataloader:
            data = model.data_preprocessor(batch, False)
            batches.append((model.extract_feat(data["inputs"]), data["data_samples"]))
            seen += len(data["data_samples"])
            if limit is not None and seen >= limit:
                break
    return batches


def norms_after_ham(head: nn.Module, features: list[Tensor]) -> list[_BatchNorm]:
    """The batch norms of ``head`` that one forward calls after its ham, in call order."""
    order: list[nn.Module] = []
    found = hams(head)
    watched = [m for m in head.modules() if isinstance(m, _BatchNorm)] + found
    handles = [m.register_forward_hook(lambda m, i, o: order.append(m)) for m in watched]
    try:
        with torch.enable_grad():  # the module calls: the fused inference path folds the BN
            head(features)
    finally:
        for handle in handles:
            handle.remove()
    first = next(i for i, m in enumerate(order) if m in found)
    return list(dict.fromkeys(m for m in order[first:] if isinstance(m, _BatchNorm)))


class ProtocolStudy:
    """One checkpoint's head evaluated from cached backbone features.

    Args:
        evaluation: The checkpoint's test loop (:class:`~.eval_variance.Evaluation`); its first
            run loads the weights and sets up the evaluator.
        train_images: Training images (test pipeline, in order) kept for re-estimating the
            batch norms.
    """

    def __init__(self, evaluation: Evaluation, train_images: int = 256) -> None:
        self.reference = evaluation()  # loads the weights; the config's protocol, whole model
        runner = evaluation.runner
        self.model = runner.model
        self.evaluator = runner.test_evaluator
        self.model.eval()
        self.size = len(runner.test_loop.dataloader.dataset)
        self.val = cache_features(self.model, runner.test_loop.dataloader)
        cfg = runner.cfg
        train = dict(cfg.train_dataloader.dataset, pipeline=cfg.test_dataloader.dataset.pipeline)
        loader = Runner.build_dataloader(
            dict(
                batch_size=cfg.test_dataloader.get("batch_size", 1),
                num_workers=0,
                sampler=dict(type="DefaultSampler", shuffle=False),
                dataset=train,
            )
        )
        self.train = cache_features(self.model, loader, train_images)

    @property
    def head(self) -> nn.Module:
        return self.model.decode_head

    def _head_logits(self, features: list[Tensor], metas: list[dict]) -> Tensor:
        return self.head.predict(features, metas, self.model.test_cfg)

    def miou(self, logits: LogitsFn | None = None) -> float:
        """The evaluator's mIoU over the cached split, the head as it is set (or ``logits``);
        the metric's per-class table is not logged."""
        logits = logits or self._head_logits
        logger = MMLogger.get_current_instance()
        level = logger.level
        with torch.no_grad():
            for features, samples in self.val:
                metas = [sample.metainfo for sample in samples]
                results = self.model.postprocess_result(logits(features, metas), samples)
                self.evaluator.process(data_samples=results, data_batch=None)
        logger.setLevel(logging.WARNING)
        try:
            return float(self.evaluator.evaluate(self.size)["mIoU"])
        finally:
            logger.setLevel(level)

    def paper(self, runs: int, seed: int = 0) -> list[float]:
        """The paper's protocol ``runs`` times, run i after ``torch.manual_seed(seed + i)``."""
        set_eval_draws(self.model, None, 1)
        values = []
        for run in range(runs):
            torch.manual_seed(seed + run)
            values.append(self.miou())
        return values

    def ensemble(self, seeds: Sequence[int], draws: int = 12) -> list[float]:
        """The mean of ``draws`` seeded reconstructions, once per ``eval_seed``."""
        values = []
        for seed in seeds:
            set_eval_draws(self.model, seed, draws)
            values.append(self.miou())
        return values

    def logits_ensemble(self, seeds: Sequence[int], draws: int = 12) -> list[float]:
        """The mean of the logits of ``draws`` single seeded draws (``eval_seed`` = seed *
        draws + k), once per seed: the ensemble taken after the head."""

        def averaged(seed: int) -> LogitsFn:
            def logits(features: list[Tensor], metas: list[dict]) -> Tensor:
                total = 0.0
                for k in range(draws):
                    set_eval_draws(self.model, seed * draws + k, 1)
                    total = total + self._head_logits(features, metas)
                return total / draws

            return logits

        return [self.miou(averaged(seed)) for seed in seeds]

    @contextlib.contextmanager
    def norms_reestimated(self, seed: int | None, draws: int = 1) -> Iterator[int]:
        """Inside: the batch norms after the ham hold the mean and variance of their inputs over
        the cached training images, the ham set to ``eval_seed=seed, eval_draws=draws`` (None:
        new draws, after ``torch.manual_seed(0)``); yields how many norms. Restored after."""
        norms = norms_after_ham(self.head, self.val[0][0])
        saved = [(copy.deepcopy(bn.state_dict()), bn.momentum) for bn in norms]
        set_eval_draws(self.model, seed, draws)
        torch.manual_seed(0)
        for bn in norms:
            bn.reset_running_stats()
            bn.momentum = None  # the cumulative mean over the batches
            bn.train()
        try:
            with torch.no_grad():
                for features, _ in self.train:
                    self.head(features)
            for bn in norms:
                bn.eval()
            yield len(norms)
        finally:
            for bn, (state, momentum) in zip(norms, saved):
                bn.load_state_dict(state)
                bn.momentum = momentum
                bn.eval()

    def input_variance_ratio(self, seed: int | None, draws: int = 1) -> float | None:
        """Median over channels of the variance of the first norm after the ham's input over
        the val pixels, over its running variance, with the ham set so; None: no such norm."""
        norms = norms_after_ham(self.head, self.val[0][0])
        if not norms:
            return None
        inputs: list[Tensor] = []
        handle = norms[0].register_forward_hook(lambda m, i, o: inputs.append(i[0].detach()))
        set_eval_draws(self.model, seed, draws)
        torch.manual_seed(0)
        try:
            with torch.enable_grad():  # the module calls, as in norms_after_ham
                for features, _ in self.val:
                    self.head(features)
        finally:
            handle.remove()
        x = torch.cat([i.transpose(0, 1).flatten(1) for i in inputs], dim=1)  # (C, N*H*W)
        return float((x.var(dim=1) / norms[0].running_var).median())
