"""Checkpoints under torch >= 2.6's weights_only loads (hamseg.compat.checkpoint): mmengine's own
checkpoints load, a pickled callable is refused in one line naming the file and never runs, a
truncated file is named."""

import ast
import os
import os.path as osp
import pickle

import numpy as np
import pytest
import torch
from mmengine.logging import HistoryBuffer, MessageHub
from mmengine.runner import CheckpointLoader, load_checkpoint

from hamseg.compat.checkpoint import (
    MMENGINE_CHECKPOINT_TYPES,
    CorruptCheckpointError,
    UnsafeCheckpointError,
    load_checkpoint_file,
)
from tests.conftest import REPO, TINY_FCN
from tests.helpers import TEST, data_options, run_tool


class _RunsCommand:
    """Unpickling this calls os.system(command)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


@pytest.fixture
def evil(tmp_path):
    """(checkpoint path, marker path): a tiny-model checkpoint carrying a pickled callable."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS

    init_default_scope("mmseg")
    model = MODELS.build(Config.fromfile(TINY_FCN).model)
    marker = tmp_path / "PWNED"
    path = str(tmp_path / "evil.pth")
    payload = dict(iter=5, payload=_RunsCommand(f"touch {marker}"))
    torch.save(dict(meta=payload, state_dict=model.state_dict()), path)
    return path, marker


def test_message_hub_state_round_trips(tmp_path):
    hub = MessageHub.get_instance("allowlist-test")
    hub.update_scalar("train/loss", np.float64(0.5))
    hub.update_info("dataset_meta", dict(classes=("a", "b"), palette=[[0, 0, 0], [1, 2, 3]]))
    path = str(tmp_path / "ckpt.pth")
    torch.save(dict(message_hub=hub.state_dict(), meta=dict(seed=np.int64(3))), path)
    loaded = load_checkpoint_file(path)
    buffer = loaded["message_hub"]["log_scalars"]["train/loss"]
    assert isinstance(buffer, HistoryBuffer) and buffer.current() == 0.5
    assert loaded["meta"]["seed"] == 3 and torch.load(path)["meta"]["seed"] == 3
    assert set(torch.serialization.get_unsafe_globals_in_checkpoint(path)) <= {
        f"{t.__module__}.{t.__qualname__}" for t in MMENGINE_CHECKPOINT_TYPES
    }


def test_every_loader_refuses_a_pickled_callable_in_one_line(evil):
    path, marker = evil
    from mmseg.apis import init_model

    for load in (
        lambda: CheckpointLoader.load_checkpoint(path),
        lambda: load_checkpoint_file(path),
        lambda: load_checkpoint(torch.nn.Linear(1, 1), path),
        lambda: init_model(TINY_FCN, path, device="cpu"),
    ):
        with pytest.raises(UnsafeCheckpointError) as info:
            load()
        assert isinstance(info.value, pickle.UnpicklingError)
        assert path in str(info.value) and "posix.system" in str(info.value)
        assert "\n" not in str(info.value)
    assert not marker.exists()


def test_a_truncated_checkpoint_is_named(tmp_path):
    path = str(tmp_path / "iter_5.pth")
    torch.save(dict(state_dict=dict(w=torch.zeros(10000))), path)
    data = open(path, "rb").read()
    with open(path, "wb") as handle:
        handle.write(data[: len(data) // 2])
    with pytest.raises(CorruptCheckpointError, match="iter_5.pth.*truncated"):
        load_checkpoint_file(path)


def _unsafe_torch_loads(path: str) -> list[int]:
    """Lines of ``torch.load(...)`` calls without ``weights_only=True`` in a file."""
    found = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        func = getattr(node, "func", None)
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "load"
            and getattr(func.value, "id", None) == "torch"
        ):
            safe = any(
                k.arg == "weights_only" and getattr(k.value, "value", None) is True
                for k in node.keywords
            )
            found += [] if safe else [node.lineno]
    return found


def test_no_torch_load_without_weights_only_in_package_and_tools():
    offenders = [
        f"{osp.join(folder, name)}:{line}"
        for top in ("hamseg", "tools")
        for folder, _, files in os.walk(osp.join(REPO, top))
        for name in files
        if name.endswith(".py")
        for line in _unsafe_torch_loads(osp.join(folder, name))
    ]
    assert not offenders, f"torch.load without weights_only=True: {offenders}"


@pytest.mark.slow
def test_test_tool_refuses_in_one_line(evil, tmp_path, tiny_data):
    path, marker = evil
    args = [TEST, TINY_FCN, path, "--work-dir", str(tmp_path / "t"), "--cfg-options"]
    result = run_tool([*args, *data_options(tiny_data)])
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: Refused to load checkpoint {path!r}") and "posix.system" in last
    assert not marker.exists()
