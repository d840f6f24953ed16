"""Test helpers: a one-thread torch fixture, untrained demo checkpoints in mmengine's format,
and a command-line tool run in this process."""

from __future__ import annotations

import glob
import os
import os.path as osp
import runpy
import sys
from typing import Optional

import pytest
import torch

import hamseg  # noqa: F401  (must precede mmseg imports)
from hamseg.datasets.context_shapes import CLASSES, PALETTE
from tests.conftest import REPO

DEMO_NMF = osp.join(REPO, "configs", "demo", "hamhead-nmf_r18-d8_context-shapes.py")
DEMO_FCN = osp.join(REPO, "configs", "demo", "fcn_r18-d8_context-shapes.py")


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for the module: on a loaded 2-core machine, OpenMP spinning of a
    second thread costs more than it gains for these small forward passes."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def paper_recipes() -> list[str]:
    """Absolute paths of the paper's recipes, sorted: ``configs/ham_*.py`` and
    ``configs/hamnet/**`` on VOC and PASCAL Context (the Cityscapes/ADE20K configs there are
    mmseg's recipes, with mmseg's init and seed)."""
    paths = glob.glob(osp.join(REPO, "configs", "ham_*.py"))
    paths += glob.glob(osp.join(REPO, "configs", "hamnet", "**", "*.py"), recursive=True)
    return sorted(p for p in paths if "cityscapes" not in p and "ade20k" not in p)


def make_checkpoint(
    path: str, config: str = DEMO_NMF, seed: int = 0, num_classes: Optional[int] = None
) -> str:
    """Save a freshly initialised demo model as mmengine does (state_dict + meta.cfg/dataset_meta).

    Runs the model once in training mode on a random batch so that the BatchNorm statistics are
    not the trivial initial ones. ``num_classes`` changes the classifier (and the stored config
    and class names) from Context Shapes' 7 classes.
    """
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS

    init_default_scope("mmseg")
    torch.manual_seed(seed)
    cfg = Config.fromfile(config)
    classes, palette = list(CLASSES), PALETTE
    if num_classes is not None:
        cfg.model.decode_head.num_classes = num_classes
        classes = [f"class {i}" for i in range(num_classes)]
        palette = [[40 * i % 256, 90 * i % 256, 150 * i % 256] for i in range(num_classes)]
    model = MODELS.build(cfg.model)
    model.init_weights()
    model.train()
    with torch.no_grad():
        model.decode_head(model.backbone(torch.rand(2, 3, 64, 64)))
    meta = dict(cfg=cfg.pretty_text, dataset_meta=dict(classes=classes, palette=palette))
    torch.save(dict(meta=meta, state_dict=model.state_dict()), path)
    return path


def run_tool_here(
    tool: str, args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> tuple[int, str, str]:
    """``python tool *args`` from the repository root, in this process (for a tool's one-line
    refusals, where a new interpreter is not the point): (exit code, stdout, stderr). No
    ``SLURM_*`` variables, as outside a slurm job."""
    for name in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(sys, "argv", [tool, *args])
    monkeypatch.chdir(REPO)
    capsys.readouterr()
    try:
        runpy.run_path(tool, run_name="__main__")
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    out = capsys.readouterr()
    return code, out.out, out.err


TRAIN = osp.join(REPO, "tools", "train.py")
TEST = osp.join(REPO, "tools", "test.py")


def data_options(root: str) -> list[str]:
    """--cfg-options that point every dataloader of the tiny configs at ``root``."""
    return [f"{split}_dataloader.dataset.data_root={root}" for split in ("train", "val", "test")]


def run_tool(args: list[str], env: dict | None = None, **kwargs):
    """``python *args`` from the repository root in a subprocess (one thread, this checkout's
    hamseg, no ``SLURM_*``): the CompletedProcess."""
    import subprocess

    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env = dict(base, OMP_NUM_THREADS="1", PYTHONPATH=REPO, **(env or {}))
    kwargs.setdefault("timeout", 600)
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=REPO, **kwargs
    )


def build_for_training(config: str, size: int, device: torch.device):
    """A config's model (train mode, random weights, SyncBN as BN) on ``device``, its optimizer
    wrapper and the config; ``config`` relative to the repository root."""
    from mmengine.config import Config
    from mmengine.model import revert_sync_batchnorm
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS

    cfg = Config.fromfile(osp.join(REPO, config))
    init_default_scope(cfg.get("default_scope", "mmseg"))
    cfg.model.pop("pretrained", None)
    cfg.model.backbone.init_cfg = None
    if cfg.model.data_preprocessor.get("size"):
        cfg.model.data_preprocessor.size = (size, size)
    torch.manual_seed(0)
    model = revert_sync_batchnorm(MODELS.build(cfg.model)).to(device).train()
    return model, build_optim_wrapper(model, cfg.optim_wrapper), cfg


def synthetic_batch(batch: int, size: int, classes: int, seed: int = 0) -> dict:
    """What the loader yields after PackSegInputs: uint8 images, labels with 5% ignored."""
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample

    g = torch.Generator().manual_seed(seed)
    inputs = [
        torch.randint(0, 256, (3, size, size), dtype=torch.uint8, generator=g) for _ in range(batch)
    ]
    samples = []
    for _ in range(batch):
        label = torch.randint(0, classes, (1, size, size), generator=g)
        label[torch.rand(label.shape, generator=g) < 0.05] = 255
        meta = dict(img_shape=(size, size), ori_shape=(size, size), pad_shape=(size, size))
        samples.append(SegDataSample(gt_sem_seg=PixelData(data=label), metainfo=meta))
    return dict(inputs=inputs, data_samples=samples)
