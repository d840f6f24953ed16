"""Multi-process training on CPU machines (torchrun or slurm + gloo): mmengine 0.10.7's launcher
calls ``torch.cuda.set_device`` and its DDP wrapper passes ``device_ids=[LOCAL_RANK]``, which
fail without a GPU; :func:`setup_cpu_distributed` starts a gloo group and a CPU DDP wrapper.
"""

from __future__ import annotations

import os
import subprocess

import torch
import torch.distributed as dist
from mmengine.config import Config

#: DDP wrapper for CPU runs (registered by hamseg.models.cpu_sync_bn in mmseg's MODEL_WRAPPERS).
CPU_WRAPPER = "mmseg.CPUSyncBNDistributedDataParallel"


def _slurm_env() -> None:
    """Fill torch's rendezvous variables from slurm's, as mmengine's slurm launcher does."""
    os.environ.setdefault("RANK", os.environ["SLURM_PROCID"])
    os.environ.setdefault("WORLD_SIZE", os.environ["SLURM_NTASKS"])
    os.environ.setdefault("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0"))
    os.environ.setdefault("MASTER_PORT", "29500")
    if "MASTER_ADDR" not in os.environ:
        nodes = os.environ["SLURM_NODELIST"]
        first = subprocess.check_output(["scontrol", "show", "hostnames", nodes], text=True)
        os.environ["MASTER_ADDR"] = first.split()[0]


def setup_cpu_distributed(cfg: Config, launcher: str) -> bool:
    """Prepare a distributed run on CPU (``cfg`` gets :data:`CPU_WRAPPER` with
    ``device_ids=None`` and the gloo backend); nothing for ``launcher='none'`` or when CUDA
    exists. Returns whether a gloo process group was set up."""
    if launcher == "none" or torch.cuda.is_available():
        return False
    if launcher == "slurm":
        _slurm_env()
    if not dist.is_initialized():
        rank = int(os.environ["RANK"])
        world = int(os.environ["WORLD_SIZE"])
        dist.init_process_group(backend="gloo", rank=rank, world_size=world)
    # no wrapper configured: the arguments mmengine's Runner would use
    wrapper = dict(cfg.get("model_wrapper_cfg") or {}) or dict(
        broadcast_buffers=False, find_unused_parameters=cfg.get("find_unused_parameters", False)
    )
    if wrapper.get("type", "MMDistributedDataParallel") == "MMDistributedDataParallel":
        wrapper["type"] = CPU_WRAPPER
    wrapper["device_ids"] = None
    cfg.model_wrapper_cfg = wrapper
    env_cfg = dict(cfg.get("env_cfg") or {})
    env_cfg["dist_cfg"] = dict(env_cfg.get("dist_cfg") or {}, backend="gloo")
    cfg.env_cfg = env_cfg
    return True
