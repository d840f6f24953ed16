"""Canaries: each adaptation of upstream code in hamseg is still needed by the installed stack.

When a test here fails, upstream changed: re-check the adaptation it names and drop it if it is
no longer needed. Behaviour is checked in fresh interpreters that do not import hamseg; code that
hamseg overrides or wraps is pinned by a digest of its source at the versions of
requirements.txt (mmengine 0.10.7, mmseg 1.2.2)."""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os.path as osp
import subprocess
import sys

import mmengine.hooks.checkpoint_hook as checkpoint_hook
import mmengine.runner.runner as runner_module
import pytest
from mmseg.apis.mmseg_inferencer import MMSegInferencer

from hamseg.compat import checkpoint
from tools.lib.mmseg_front_end import mmseg_tools_dir
from tools.lib.mmseg_tool_fixes import FIXES


def fresh(code: str) -> subprocess.CompletedProcess:
    """``code`` in a new interpreter, without hamseg."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(
    importlib.util.find_spec("mmcv._ext") is not None, reason="a compiled mmcv is installed"
)
def test_mmseg_models_need_mmcv_ops_on_mmcv_lite():
    """hamseg.compat.mmcv_ops: mmseg 1.2.2 imports two compiled ops unguarded."""
    result = fresh("import mmseg.models")
    assert result.returncode != 0 and "mmcv._ext" in result.stderr


def test_mmengine_needs_pkg_resources_for_mmseg_bases(tmp_path):
    """hamseg.compat.package_lookup.install: mmengine 0.10.7 finds mmseg:: through it."""
    config = tmp_path / "cfg.py"
    config.write_text("_base_ = ['mmseg::_base_/models/pspnet_r50-d8.py']\n")
    code = "import sys; sys.modules['pkg_resources'] = None\n"
    result = fresh(code + f"from mmengine import Config; Config.fromfile({str(config)!r})")
    assert result.returncode != 0 and "pkg_resources" in result.stderr


def test_mmengine_does_not_know_hamseg_config_names():
    """hamseg.compat.package_lookup.register_hamseg."""
    name = "hamseg::demo/hamhead-nmf_r18-d8_context-shapes.py"
    result = fresh(f"from mmengine import Config; Config.fromfile({name!r})")
    assert result.returncode != 0


def test_mmengine_checkpoints_need_the_allow_list(tmp_path):
    """hamseg.compat.checkpoint: torch >= 2.6 refuses mmengine 0.10.7's message hub."""
    path = str(tmp_path / "hub.pth")
    code = (
        "import torch\nfrom mmengine.logging import MessageHub\n"
        "hub = MessageHub.get_instance('canary'); hub.update_scalar('loss', 0.5)\n"
        f"torch.save(dict(message_hub=hub.state_dict()), {path!r})\n"
        f"torch.load({path!r}, weights_only=True)\n"
    )
    result = fresh(code)
    assert result.returncode != 0 and "HistoryBuffer" in result.stderr


def test_history_buffer_pickles_getattr():
    """hamseg.compat.checkpoint trims HistoryBuffer's pickle only while this holds."""
    assert checkpoint.UPSTREAM_PICKLES_GETATTR


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: Upstream code that hamseg copies, overrides or wraps, with the digest of its source.
OVERRIDDEN = {
    # hamseg.engine.checkpoints.AtomicCheckpointHook copies it (pointer written atomically)
    "CheckpointHook._save_checkpoint_with_step": (
        lambda: inspect.getsource(checkpoint_hook.CheckpointHook._save_checkpoint_with_step),
        "cdbc1b54c7c88d95",
    ),
    # hamseg.compat.worker_signals: builds every loader with default_worker_init_fn
    "Runner.build_dataloader": (
        lambda: inspect.getsource(runner_module.Runner.build_dataloader),
        "5ba55eedc45e4f5f",
    ),
    # hamseg.apis.inference.HamSegInferencer overrides both
    "MMSegInferencer._init_pipeline": (
        lambda: inspect.getsource(MMSegInferencer._init_pipeline),
        "6157680f63f150c3",
    ),
    "MMSegInferencer._load_model_from_metafile": (
        lambda: inspect.getsource(MMSegInferencer._load_model_from_metafile),
        "425e18d8b64dc880",
    ),
}
#: mmseg 1.2.2's tool scripts that tools/lib/mmseg_tool_fixes.py patches while they run.
TOOL_SCRIPTS = {
    "analysis_tools/get_flops.py": "757cb03692d93a45",
    "analysis_tools/browse_dataset.py": "be114c33749dfa1d",
    "analysis_tools/benchmark.py": "3318b4fde5c982d0",
    "analysis_tools/confusion_matrix.py": "9a99f040618153ff",
    "misc/browse_dataset.py": "3e0cc475553887e6",
    "misc/print_config.py": "beb5518f4a519ab9",
    "misc/publish_model.py": "d9864feb1ddc44c6",
}


@pytest.mark.parametrize("name", OVERRIDDEN)
def test_overridden_upstream_code_is_the_pinned_versions(name):
    source, expected = OVERRIDDEN[name]
    assert digest(source()) == expected, f"{name} changed upstream: re-check hamseg's override"


def test_every_patched_tool_script_is_pinned():
    assert set(TOOL_SCRIPTS) == set(FIXES)
    for script, expected in TOOL_SCRIPTS.items():
        with open(osp.join(mmseg_tools_dir(), script), encoding="utf-8") as f:
            assert digest(f.read()) == expected, f"{script} changed upstream: re-check its fixes"
