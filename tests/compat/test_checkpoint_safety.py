"""Safe loading: every checkpoint path uses weights_only=True and refuses a pickled callable.

The crafted checkpoint holds real weights plus an object whose unpickling would call
``os.system('touch <marker>')``. Every loader must refuse it with a message naming the file and
the global (``posix.system``), and the marker file must never appear.
"""

from __future__ import annotations

import ast
import os
import os.path as osp
import pickle

import pytest
import torch
from mmengine.runner import CheckpointLoader, load_checkpoint

from hamseg.compat.checkpoint import (
    CorruptCheckpointError,
    UnsafeCheckpointError,
    load_checkpoint_file,
)
from tests.conftest import REPO
from tests.robust.helpers import TEST, TINY_HAM, build_runner, run_tool, tiny_cfg


class _RunsCommand:
    """Unpickling this calls os.system(command)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


@pytest.fixture
def evil(tmp_path):
    """(checkpoint path, marker path): a tiny-model checkpoint carrying a pickled callable."""
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS

    from tests.robust.helpers import Config

    init_default_scope("mmseg")
    model = MODELS.build(Config.fromfile(TINY_HAM).model)
    marker = tmp_path / "PWNED"
    path = tmp_path / "evil.pth"
    torch.save(
        dict(
            meta=dict(iter=5, payload=_RunsCommand(f"touch {marker}")),
            state_dict=model.state_dict(),
        ),
        path,
    )
    return str(path), marker


def assert_refused(err: BaseException, path: str, marker) -> None:
    text = str(err)
    assert isinstance(err, UnsafeCheckpointError) and isinstance(err, pickle.UnpicklingError)
    assert path in text and "posix.system" in text
    assert "nothing in the file was executed" in text
    assert not marker.exists()


def test_checkpoint_loader_refuses_pickled_callable(evil):
    path, marker = evil
    with pytest.raises(UnsafeCheckpointError) as info:
        CheckpointLoader.load_checkpoint(path)
    assert_refused(info.value, path, marker)
    with pytest.raises(UnsafeCheckpointError) as info:
        load_checkpoint_file(path)  # the converters' entry point
    assert_refused(info.value, path, marker)


def test_env_switch_cannot_disable_weights_only(evil, monkeypatch):
    path, marker = evil
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    monkeypatch.delenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", raising=False)
    with pytest.raises(UnsafeCheckpointError) as info:
        CheckpointLoader.load_checkpoint(path)
    assert_refused(info.value, path, marker)
    # the environment is restored afterwards
    assert os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] == "1"
    assert "TORCH_FORCE_WEIGHTS_ONLY_LOAD" not in os.environ


def test_load_from_resume_and_init_model_refuse(evil, tmp_path, tiny_data):
    path, marker = evil
    # load_from (train) and test: Runner.load_checkpoint
    runner = build_runner(tiny_cfg(tiny_data, str(tmp_path / "w1"), dict(load_from=path)))
    with pytest.raises(UnsafeCheckpointError) as info:
        runner.load_or_resume()
    assert_refused(info.value, path, marker)
    # --resume PATH: Runner.resume
    options = dict(load_from=path, resume=True)
    runner = build_runner(tiny_cfg(tiny_data, str(tmp_path / "w2"), options))
    with pytest.raises(UnsafeCheckpointError) as info:
        runner.load_or_resume()
    assert_refused(info.value, path, marker)
    # inference API and mmengine's load_checkpoint(model, file)
    from mmseg.apis import init_model

    with pytest.raises(UnsafeCheckpointError) as info:
        init_model(TINY_HAM, path, device="cpu")
    assert_refused(info.value, path, marker)
    with pytest.raises(UnsafeCheckpointError):
        load_checkpoint(torch.nn.Linear(1, 1), path)
    assert not marker.exists()


def test_plain_checkpoints_still_load(tmp_path):
    path = str(tmp_path / "plain.pth")
    torch.save(dict(state_dict=dict(w=torch.ones(2)), meta=dict(iter=3)), path)
    loaded = load_checkpoint_file(path)
    assert loaded["meta"]["iter"] == 3 and loaded["state_dict"]["w"].sum() == 2


def test_truncated_checkpoint_is_named(tmp_path):
    path = str(tmp_path / "iter_5.pth")
    torch.save(dict(state_dict=dict(w=torch.zeros(10000))), path)
    data = open(path, "rb").read()
    with open(path, "wb") as handle:
        handle.write(data[: len(data) // 2])
    with pytest.raises(CorruptCheckpointError, match="iter_5.pth.*truncated"):
        load_checkpoint_file(path)


def _torch_load_calls(path: str) -> list[tuple[int, bool]]:
    """(line, passes weights_only=True) of every ``torch.load(...)`` call in a file."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    calls = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "load"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "torch"
        ):
            safe = any(
                k.arg == "weights_only"
                and isinstance(k.value, ast.Constant)
                and k.value.value is True
                for k in node.keywords
            )
            calls.append((node.lineno, safe))
    return calls


def test_no_torch_load_without_weights_only_in_package_and_tools():
    offenders = []
    for top in ("hamseg", "tools"):
        for folder, _, files in os.walk(osp.join(REPO, top)):
            for name in files:
                if name.endswith(".py"):
                    full = osp.join(folder, name)
                    offenders += [
                        f"{full}:{line}" for line, ok in _torch_load_calls(full) if not ok
                    ]
    assert not offenders, f"torch.load without weights_only=True: {offenders}"


@pytest.mark.slow
def test_test_tool_refuses_with_a_clear_message(evil, tmp_path, tiny_data):
    path, marker = evil
    from tests.robust.helpers import data_options

    result = run_tool(
        [
            TEST,
            TINY_HAM,
            path,
            "--work-dir",
            str(tmp_path / "t"),
            "--cfg-options",
            *data_options(tiny_data),
        ]
    )
    assert result.returncode != 0
    assert "Refused to load checkpoint" in result.stderr and "posix.system" in result.stderr
    assert not marker.exists()


@pytest.mark.slow
def test_converter_refuses_with_the_clear_message(evil, tmp_path):
    path, marker = evil
    converter = osp.join(REPO, "tools", "convert_release_checkpoint.py")
    result = run_tool([converter, path, str(tmp_path / "out.pth")])
    assert result.returncode != 0
    assert "posix.system" in result.stderr
    assert "Refused to load checkpoint" in result.stderr, result.stderr[-2000:]
    assert not marker.exists() and not (tmp_path / "out.pth").exists()
