"""Test helpers: a one-thread torch fixture and loading a script under tools/ as a module."""

from __future__ import annotations

import importlib.util
import os.path as osp
from types import ModuleType

import pytest
import torch

from tests.conftest import REPO


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for the module: on a loaded 2-core machine, OpenMP spinning of a
    second thread costs more than it gains for these small forward passes."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def load_tool(relpath: str) -> ModuleType:
    """Import ``tools/<relpath>`` (a script, not a package module) without running ``main``."""
    path = osp.join(REPO, "tools", relpath)
    name = "tool_" + osp.splitext(relpath)[0].replace("/", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
