"""Canaries: each adaptation of upstream code in hamseg is still needed by the installed stack,
and the private upstream code hamseg uses or wraps is the version it was written against.

When a test here fails, upstream changed: re-check the adaptation it names, and drop it if it is
no longer needed. Behaviour is checked in fresh interpreters that do not import hamseg; code is
pinned by a digest of its source as the installed files hold it (mmengine 0.10.7, mmseg 1.2.2)."""

import ast
import hashlib
import importlib
import importlib.util
import subprocess
import sys

import pytest

from hamseg.compat import checkpoint


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


def test_mmengines_loader_refuses_its_own_checkpoints(tmp_path):
    """hamseg.compat.checkpoint: under torch >= 2.6 mmengine 0.10.7's CheckpointLoader cannot
    read back the message hub it saved (mmengine#1655); mmengine#1650 would make this pass."""
    path = str(tmp_path / "hub.pth")
    code = (
        "import torch\nfrom mmengine.logging import MessageHub\n"
        "from mmengine.runner.checkpoint import CheckpointLoader\n"
        "hub = MessageHub.get_instance('canary'); hub.update_scalar('loss', 0.5)\n"
        f"torch.save(dict(message_hub=hub.state_dict()), {path!r})\n"
        f"CheckpointLoader.load_checkpoint({path!r})\n"
    )
    result = fresh(code)
    assert result.returncode != 0 and "HistoryBuffer" in result.stderr
    assert checkpoint.LOADER_USES_TORCH_DEFAULT and checkpoint.UPSTREAM_PICKLES_GETATTR
    assert checkpoint.INSTALLED


def upstream_source(module: str, qualname: str) -> str:
    """The source of ``module.qualname`` as the installed file holds it (before any patch)."""
    spec = importlib.util.find_spec(module)
    with open(spec.origin, encoding="utf-8") as f:
        text = f.read()
    node: ast.AST = ast.parse(text)
    for name in qualname.split("."):
        node = next(n for n in ast.iter_child_nodes(node) if getattr(n, "name", None) == name)
    return ast.get_source_segment(text, node)


#: Private or wrapped upstream code hamseg relies on: (module, qualname) -> (digest, user).
PINNED = {
    ("mmengine.config.config", "Config._substitute_predefined_vars"): "b5c021558c9cc0ea",
    ("mmengine.config.config", "Config._get_cfg_path"): "9e346aa7d78f4a88",
    ("mmengine.runner.checkpoint", "load_from_local"): "a0bebcae62942415",
    ("mmengine.utils.package_utils", "get_installed_path"): "c7bc282172bb8a67",
    ("mmengine.utils.package_utils", "is_installed"): "e7a5b6cb20b6cbb2",
    # hamseg.engine.checkpoints.AtomicCheckpointHook copies it (the pointer written atomically)
    (
        "mmengine.hooks.checkpoint_hook",
        "CheckpointHook._save_checkpoint_with_step",
    ): "a397cd25e8df12a0",
    # hamseg.engine's worker signals: mmengine builds every loader with default_worker_init_fn
    ("mmengine.runner.runner", "Runner.build_dataloader"): "bd640f32b20a93b8",
    # hamseg.apis.inference.HamSegInferencer overrides both
    ("mmseg.apis.mmseg_inferencer", "MMSegInferencer._init_pipeline"): "b954e804c5c647a8",
    ("mmengine.infer.infer", "BaseInferencer._load_model_from_metafile"): "bdb5771bc574f4f9",
}


@pytest.mark.parametrize("where", PINNED, ids=[q for _, q in PINNED])
def test_pinned_upstream_code_is_unchanged(where):
    digest = hashlib.sha256(upstream_source(*where).encode()).hexdigest()[:16]
    assert digest == PINNED[where], f"{where} changed upstream: re-check what hamseg does with it"


def test_config_variables_rely_on_the_substitution_call_of_file2dict():
    """hamseg.cli.options.apply_config_variables edits the temporary copy mmengine reads."""
    source = upstream_source("mmengine.config.config", "Config._file2dict")
    assert "Config._substitute_predefined_vars(filename,\n" in source
    assert "temp_config_file.name)" in source
