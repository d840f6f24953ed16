"""CPU synchronized BN: HamSyncBN, the SyncBN -> HamSyncBN swap of CPU DDP, and a real torchrun
(2 gloo processes with batch 2 and synchronized BN match 1 process with batch 4 and BN)."""

import os
import os.path as osp
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
from mmcv.cnn import build_norm_layer
from mmengine.config import Config
from mmengine.registry import MODEL_WRAPPERS, init_default_scope
from torch import nn

from hamseg.engine.cpu import (
    CPUSyncBNDistributedDataParallel,
    HamSyncBatchNorm,
    convert_sync_batchnorm_to_ham,
    setup_cpu_distributed,
)
from tests.conftest import REPO

WORKER = osp.join(REPO, "tests", "robust", "syncbn_worker.py")


def test_without_process_group_it_is_batch_norm():
    torch.manual_seed(0)
    ref, ours = nn.BatchNorm2d(5), HamSyncBatchNorm(5)
    with torch.no_grad():
        ref.weight.uniform_(0.5, 1.5)
        ref.bias.uniform_(-1, 1)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(3, 5, 4, 6) * 2 + 1
    x_ref, x_ours = x.clone().requires_grad_(), x.clone().requires_grad_()
    grad = torch.randn_like(x)
    (ref(x_ref) * grad).sum().backward()
    (ours(x_ours) * grad).sum().backward()
    torch.testing.assert_close(x_ours.grad, x_ref.grad)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad)
    torch.testing.assert_close(ours.running_var, ref.running_var)
    ours.eval(), ref.eval()
    torch.testing.assert_close(ours(x), ref(x))


def test_registered_as_norm_layer_with_bn_names():
    init_default_scope("mmseg")
    name, layer = build_norm_layer(dict(type="HamSyncBN", requires_grad=True), 8, postfix=1)
    assert name == "bn1" and isinstance(layer, HamSyncBatchNorm)  # same state-dict keys as BN


def test_convert_keeps_parameters_buffers_and_names():
    model = nn.Sequential(
        nn.Conv2d(3, 4, 1), nn.SyncBatchNorm(4), nn.Sequential(nn.SyncBatchNorm(4))
    )
    model[1].running_mean.fill_(0.25)
    weight, keys = model[1].weight, list(model.state_dict())
    model.eval()
    converted = convert_sync_batchnorm_to_ham(model)
    assert converted is model
    assert [type(m) for m in model.modules()].count(HamSyncBatchNorm) == 2
    assert not any(isinstance(m, nn.SyncBatchNorm) for m in model.modules())
    assert model[1].weight is weight  # an optimizer holding it keeps working
    assert list(model.state_dict()) == keys
    assert model[1].running_mean.eq(0.25).all() and not model[1].training


@pytest.fixture
def gloo_world_of_one(monkeypatch):
    """A 1-process gloo group (what torchrun sets up), destroyed afterwards."""
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(29400 + os.getpid() % 500))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def test_setup_selects_cpu_wrapper_that_swaps_syncbn(gloo_world_of_one):
    cfg = Config(dict(find_unused_parameters=True))
    assert setup_cpu_distributed(cfg, "pytorch")
    assert cfg.model_wrapper_cfg == dict(
        type="mmseg.CPUSyncBNDistributedDataParallel",
        device_ids=None,
        broadcast_buffers=False,
        find_unused_parameters=True,
    )
    init_default_scope("mmseg")
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.SyncBatchNorm(4))
    # mmengine's Runner looks the type up in mmengine's root registry, then builds it
    wrapped = MODEL_WRAPPERS.build(cfg.model_wrapper_cfg, default_args=dict(module=model))
    assert isinstance(wrapped, CPUSyncBNDistributedDataParallel)
    assert isinstance(wrapped.module[1], HamSyncBatchNorm)


def test_a_configured_wrapper_type_is_kept(gloo_world_of_one):
    cfg = Config(dict(model_wrapper_cfg=dict(type="SomeOtherWrapper", foo=1)))
    setup_cpu_distributed(cfg, "pytorch")
    assert cfg.model_wrapper_cfg == dict(type="SomeOtherWrapper", foo=1, device_ids=None)


def test_with_cuda_the_config_keeps_torch_syncbn(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    cfg = Config(dict(norm_cfg=dict(type="SyncBN"), env_cfg=dict(dist_cfg=dict(backend="nccl"))))
    before = cfg.to_dict()
    assert not setup_cpu_distributed(cfg, "pytorch")
    assert cfg.to_dict() == before


@pytest.mark.slow
def test_torchrun_two_processes_match_one_process_with_double_batch(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=REPO)
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    torchrun = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    for args in ([WORKER, "one.pth"], [*torchrun, WORKER, "two.pth", "--control"]):
        done = subprocess.run(
            [sys.executable, *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-4000:]
    one, two = torch.load(tmp_path / "one.pth"), torch.load(tmp_path / "two.pth")
    assert (one["norms"], two["norms"]) == (["BatchNorm2d"], ["HamSyncBatchNorm"])
    assert two["wrapper"] == "CPUSyncBNDistributedDataParallel"
    torch.testing.assert_close(two["losses"], one["losses"], atol=1e-5, rtol=0)
    assert len(one["grads"][0]) > 50
    torch.testing.assert_close(two["grads"], one["grads"], atol=1e-5, rtol=0)
    torch.testing.assert_close(two["running_mean"], one["running_mean"], atol=1e-5, rtol=0)
    torch.testing.assert_close(two["running_var"], one["running_var"], atol=1e-5, rtol=1e-5)
    # Unsynchronized BN in the same 2-process run is measurably different: the check has teeth.
    control = [(one["grads"][0][k] - g).abs().max() for k, g in two["control_grads"].items()]
    assert max(control) > 1e-3
