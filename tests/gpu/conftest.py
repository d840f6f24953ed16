"""GPU tests: what the CUDA paths must do. Run them on a CUDA machine with ``pytest -m gpu`` (or
``bash tools/gpu_check.sh``, which also writes a report); without CUDA they are skipped."""

from __future__ import annotations

import json
import os
import os.path as osp

import pytest
import torch


@pytest.fixture
def cuda() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device())


def record(name: str, values: dict) -> None:
    """Add measured numbers to the gpu_check report (``HAMSEG_GPU_REPORT_DIR``), if one is made."""
    folder = os.environ.get("HAMSEG_GPU_REPORT_DIR")
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    with open(osp.join(folder, f"test_{name}.json"), "w", encoding="utf-8") as f:
        json.dump(values, f, indent=2)
