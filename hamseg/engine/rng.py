"""The generator states a run's randomness lives in (Python's, numpy's, torch's CPU and current
CUDA device's), as values a ``weights_only`` checkpoint holds: what exact resume saves for every
rank and DataLoader worker (:mod:`.random_state`, :mod:`.resume_skip`)."""

from __future__ import annotations

import random

import numpy as np
import torch


def get_rng_state() -> dict:
    """Python's, numpy's and torch's (CPU, current CUDA device) global generator states, in
    types that load with ``weights_only=True`` (numpy's key as an int64 tensor)."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    numpy = dict(kind=kind, keys=torch.from_numpy(keys.astype(np.int64)), pos=int(pos))
    numpy.update(has_gauss=int(has_gauss), gauss=float(gauss))
    state = dict(python=random.getstate(), numpy=numpy, torch=torch.get_rng_state())
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    """Restore what :func:`get_rng_state` returned (the CUDA part only where CUDA is in use)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    keys = n["keys"].numpy().astype(np.uint32)
    np.random.set_state((n["kind"], keys, n["pos"], n["has_gauss"], n["gauss"]))
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"].cpu())
