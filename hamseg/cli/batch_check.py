"""The total batch a recipe was written for, checked at launch: GPUs x batch per GPU must equal
``auto_scale_lr.base_batch_size`` (mmseg's key) unless the user accepts or scales
(docs/recipes.md, "Batch")."""

from __future__ import annotations

import os
import os.path as osp

from mmengine.config import Config
from mmengine.dist import get_world_size, is_distributed
from mmengine.logging import print_log

from .common import CLIError

#: What tools/train.py offers for another total batch.
ACCEPT = "--allow-batch-mismatch"
SCALE = "--auto-scale-lr"


def launch_world_size(launcher: str) -> int:
    """The number of training processes: the process group's size once it exists, else what
    the launcher's environment says (torchrun and mpirun: WORLD_SIZE, slurm: SLURM_NTASKS)."""
    if is_distributed():
        return get_world_size()
    if launcher == "none":
        return 1
    name = "SLURM_NTASKS" if launcher == "slurm" else "WORLD_SIZE"
    return int(os.environ.get(name, 1))


def check_total_batch(
    cfg: Config, world_size: int, accept: bool = False, scale: bool = False
) -> None:
    """Refuse (:class:`CLIError`, one line) a run whose total batch ``world_size`` x
    ``train_dataloader.batch_size`` differs from the recipe's ``auto_scale_lr.base_batch_size``,
    unless ``accept`` (train at that batch with the recipe's lr) or ``scale`` (sets
    ``auto_scale_lr.enable``: mmengine multiplies the lr by total / base); both are logged.
    Configs without a base batch are not checked."""
    auto = dict(cfg.get("auto_scale_lr") or {})
    base = auto.get("base_batch_size")
    if scale:
        if base is None:
            raise CLIError(
                f"{SCALE}: the config has no auto_scale_lr.base_batch_size (the total batch its "
                "lr is for); set it with --cfg-options auto_scale_lr.base_batch_size=N"
            )
        cfg.auto_scale_lr = dict(auto, enable=True)
    per_gpu = cfg.train_dataloader.batch_size
    total = world_size * per_gpu
    if base is None or total == base:
        return
    name = osp.basename(cfg.filename or "the config")
    what = f"{name}: total batch {world_size} process(es) x {per_gpu} = {total}"
    if cfg.auto_scale_lr.get("enable", False):
        print_log(f"{what}, recipe {base}: lr scaled by {total}/{base} (auto_scale_lr)", "current")
        return
    if accept:
        print_log(f"{what}, recipe {base}: trained with the recipe's lr ({ACCEPT})", "current")
        return
    fixes = [f"{base // per_gpu} GPUs"] if base % per_gpu == 0 else []
    if base % world_size == 0:
        fixes.append(f"--cfg-options train_dataloader.batch_size={base // world_size}")
    fixes += [f"{SCALE} (lr x {total}/{base})", f"{ACCEPT} (the recipe's lr at batch {total})"]
    raise CLIError(
        f"{what}, but the recipe is for {base} (auto_scale_lr.base_batch_size): use "
        + ", or ".join(fixes)
    )
