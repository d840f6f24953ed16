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
