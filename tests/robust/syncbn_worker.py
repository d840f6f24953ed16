"""Three SGD steps of the tiny HamHead model (fixed dictionary) on a global batch of 4, for
tests/compat/test_distributed_syncbn.py: as one process with BN, or under torchrun as 2 processes
with SyncBN, which ``setup_cpu_distributed``'s DDP wrapper turns into HamSyncBN (``--control``:
also one step of plain BN inside DDP). Rank 0 saves what it saw to ``sys.argv[1]``."""

import os
import os.path as osp
import sys

import hamseg  # noqa: F401  (before mmseg; the repository is on PYTHONPATH)

# isort: split
import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.registry import MODEL_WRAPPERS, init_default_scope
from mmseg.registry import MODELS
from torch import nn

from hamseg.engine import setup_cpu_distributed
from tests.helpers import synthetic_batch

CONFIG = osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), "data", "tiny_ham.py")


def build(cfg: Config, sync: bool):
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    if not dist.is_initialized():
        return model, model
    model = nn.SyncBatchNorm.convert_sync_batchnorm(model) if sync else model
    ddp = MODEL_WRAPPERS.build(dict(cfg.model_wrapper_cfg), default_args=dict(module=model))
    return ddp, ddp.module


def step(model, core, seed: int) -> tuple[float, dict]:
    """One forward/backward of this rank's share of global batch ``seed``."""
    world = dist.get_world_size() if dist.is_initialized() else 1
    rank = dist.get_rank() if dist.is_initialized() else 0
    data = synthetic_batch(4, 32, 3, seed=seed)
    data = {key: value[rank * 4 // world : (rank + 1) * 4 // world] for key, value in data.items()}
    loss, _ = core.parse_losses(model(**core.data_preprocessor(data, True), mode="loss"))
    loss.backward()
    mean = loss.detach().clone()
    if world > 1:
        dist.all_reduce(mean)
    grads = {n: p.grad.clone() for n, p in core.named_parameters() if p.grad is not None}
    return float(mean) / world, grads


def main() -> None:
    cfg = Config.fromfile(CONFIG)
    cfg.model.decode_head.ham_cfg.update(init="fixed", D=16)  # the same dictionary everywhere
    setup_cpu_distributed(cfg, "pytorch" if "RANK" in os.environ else "none")
    init_default_scope("mmseg")
    model, core = build(cfg, sync=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    norms = {type(m).__name__ for m in core.modules() if "Norm" in type(m).__name__}
    record = dict(wrapper=type(model).__name__, norms=sorted(norms), losses=[], grads=[])
    for seed in range(3):
        optimizer.zero_grad()
        loss, grads = step(model, core, seed)
        record["losses"].append(loss)
        record["grads"].append(grads)
        optimizer.step()
    first = next(m for m in core.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm))
    record.update(running_mean=first.running_mean, running_var=first.running_var)
    if "--control" in sys.argv:
        record["control_grads"] = step(*build(cfg, sync=False), seed=0)[1]
    if not dist.is_initialized() or dist.get_rank() == 0:
        torch.save(record, sys.argv[1])
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
