"""A few SGD steps of the tiny HamHead model; rank 0 saves losses and gradients.

Run by tests/compat/test_distributed_syncbn.py twice:

- under ``torchrun --nproc_per_node 2`` with ``--norm SyncBN``: ``setup_cpu_distributed``
  selects the CPU DDP wrapper, which turns torch's SyncBatchNorm into HamSyncBN; each process
  takes its half of the global batch;
- as one process with ``--norm BN``: plain batch norm on the whole global batch.

With ``--control`` the distributed run also records the first-step gradients of the same model
with unsynchronized BN (plain BN inside DDP), to show that the comparison can tell them apart.
"""

from __future__ import annotations

import argparse
import os
import os.path as osp

import hamseg  # noqa: F401  (before mmseg; the repository is on PYTHONPATH)

# isort: split
import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.registry import MODEL_WRAPPERS, init_default_scope
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample
from torch.nn.modules.batchnorm import _BatchNorm

from hamseg.engine import setup_cpu_distributed

CONFIG = osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), "data", "tiny_ham.py")
SIZE = 32


def set_norm(node, norm: str):
    """Every ``norm_cfg`` type of a config tree becomes ``norm``."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "norm_cfg" and isinstance(value, dict):
                value["type"] = norm
            else:
                set_norm(value, norm)
    elif isinstance(node, list):
        for value in node:
            set_norm(value, norm)


def build(cfg: Config, norm: str, distributed: bool):
    model_cfg = cfg.model.to_dict() if hasattr(cfg.model, "to_dict") else dict(cfg.model)
    set_norm(model_cfg, norm)
    # Fixed (seeded) dictionary: the random draws of the two runs could not be compared.
    model_cfg["decode_head"]["ham_cfg"].update(init="fixed", D=16)
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    model.init_weights()
    core = model
    if distributed:
        model = MODEL_WRAPPERS.build(dict(cfg.model_wrapper_cfg), default_args=dict(module=model))
        core = model.module
    return model, core


def global_batch(step: int, total: int):
    gen = torch.Generator().manual_seed(100 + step)
    images = torch.randint(0, 256, (total, 3, SIZE, SIZE), generator=gen, dtype=torch.uint8)
    labels = torch.randint(0, 3, (total, 1, SIZE, SIZE), generator=gen)
    return images, labels


def local_data(step: int, batch: int, rank: int, world: int) -> dict:
    images, labels = global_batch(step, batch * world)
    part = slice(rank * batch, (rank + 1) * batch)
    meta = dict(img_shape=(SIZE, SIZE), ori_shape=(SIZE, SIZE), pad_shape=(SIZE, SIZE))
    samples = [
        SegDataSample(gt_sem_seg=PixelData(data=label), metainfo=dict(meta))
        for label in labels[part]
    ]
    return dict(inputs=list(images[part]), data_samples=samples)


def step_once(model, core, data: dict, world: int):
    data = core.data_preprocessor(data, True)
    loss, _ = core.parse_losses(model(**data, mode="loss"))
    loss.backward()
    mean_loss = loss.detach().clone()
    if world > 1:
        dist.all_reduce(mean_loss)
        mean_loss /= world
    grads = {n: p.grad.detach().clone() for n, p in core.named_parameters() if p.grad is not None}
    return float(mean_loss), grads


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--norm", default="SyncBN")
    parser.add_argument("--batch", type=int, default=2, help="per process")
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--control", action="store_true")
    args = parser.parse_args()

    launcher = "pytorch" if "RANK" in os.environ else "none"
    cfg = Config.fromfile(CONFIG)
    setup_cpu_distributed(cfg, launcher)
    init_default_scope("mmseg")
    distributed = launcher != "none"
    world = dist.get_world_size() if distributed else 1
    rank = dist.get_rank() if distributed else 0

    model, core = build(cfg, args.norm, distributed)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    record = dict(
        wrapper=type(model).__name__,
        norm_layers=sorted(
            {type(m).__name__ for m in core.modules() if "Norm" in type(m).__name__}
        ),
        losses=[],
        grads=[],
    )
    for step in range(args.iters):
        optimizer.zero_grad()
        loss, grads = step_once(model, core, local_data(step, args.batch, rank, world), world)
        record["losses"].append(loss)
        record["grads"].append(grads)
        optimizer.step()
    first_norm = next(m for m in core.modules() if isinstance(m, _BatchNorm))
    record["running_mean"] = first_norm.running_mean.clone()
    record["running_var"] = first_norm.running_var.clone()

    if args.control:
        model, core = build(cfg, "BN", distributed)
        _, record["control_grads"] = step_once(
            model, core, local_data(0, args.batch, rank, world), world
        )
    if rank == 0:
        torch.save(record, args.out)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
