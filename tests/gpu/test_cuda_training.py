"""Training on CUDA: fp16 AMP, SyncBN under NCCL, the full VOC model (marker ``gpu``)."""

from __future__ import annotations

import time

import pytest
import torch
from mmengine.optim import AmpOptimWrapper

import hamseg  # noqa: F401  (before mmseg)
from tests.gpu.conftest import record
from tests.helpers import build_for_training, synthetic_batch

pytestmark = pytest.mark.gpu

TINY_HAM = "tests/data/tiny_ham.py"


def test_fp16_amp_training_is_finite_and_the_decomposition_runs_in_float32(cuda):
    model, _, cfg = build_for_training(TINY_HAM, 65, cuda)
    wrapper = AmpOptimWrapper(
        optimizer=torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
        loss_scale="dynamic",
        dtype=torch.float16,
    )
    ham = model.decode_head.hamburger.ham
    dtypes = []
    original = ham._solve

    def spy(X, batch, bases):
        dtypes.append(X.dtype)
        return original(X, batch, bases)

    ham._solve = spy
    num_classes = model.decode_head.num_classes
    losses = []
    for i in range(20):
        data = model.data_preprocessor(synthetic_batch(2, 65, num_classes, seed=i), True)
        with wrapper.optim_context(model):
            loss = sum(v for k, v in model(**data, mode="loss").items() if "loss" in k)
        wrapper.update_params(loss)
        losses.append(float(loss))
    assert all(torch.isfinite(torch.tensor(losses)))
    assert dtypes and set(dtypes) == {torch.float32}


def test_syncbn_under_a_one_process_nccl_group(cuda, tmp_path):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("nccl", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        model, wrapper, _ = build_for_training(TINY_HAM, 65, cuda)
        model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
        norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        assert norms and all(isinstance(m, torch.nn.SyncBatchNorm) for m in norms)
        ddp = DistributedDataParallel(model, device_ids=[cuda.index])
        optim = torch.optim.SGD(ddp.parameters(), lr=0.01)
        num_classes = model.decode_head.num_classes
        for i in range(3):
            data = model.data_preprocessor(synthetic_batch(2, 65, num_classes, seed=i), True)
            loss = sum(v for k, v in ddp(**data, mode="loss").items() if "loss" in k)
            optim.zero_grad()
            loss.backward()
            optim.step()
            assert torch.isfinite(loss)
        assert any(m.running_mean.abs().sum() > 0 for m in norms)  # statistics were synced in
    finally:
        dist.destroy_process_group()


def test_full_voc_model_trains_at_the_recipe_crop(cuda):
    """configs/ham_voc.py (R101-D8 + HamHead), 513x513, batch 2 (the recipe's per-GPU batch)."""
    model, wrapper, _ = build_for_training("configs/ham_voc.py", 513, cuda)
    num_classes = model.decode_head.num_classes
    torch.cuda.reset_peak_memory_stats(cuda)
    times = []
    for i in range(4):
        torch.cuda.synchronize(cuda)
        start = time.perf_counter()
        log = model.train_step(synthetic_batch(2, 513, num_classes, seed=i), wrapper)
        torch.cuda.synchronize(cuda)
        times.append(time.perf_counter() - start)
        assert torch.isfinite(log["loss"])
    s_per_iter = sorted(times[1:])[len(times[1:]) // 2]
    peak = torch.cuda.max_memory_allocated(cuda)
    print(f"ham_voc 2x3x513x513: {s_per_iter:.3f} s/iter, peak {peak / 2**30:.2f} GiB")
    record("ham_voc_train", dict(s_per_iter=s_per_iter, max_memory_allocated=peak))
