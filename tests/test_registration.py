"""`import hamseg` and `custom_imports=['hamseg']` register hamseg's modules into mmseg."""

from __future__ import annotations

import subprocess
import sys

CUSTOM_IMPORTS_ONLY = """
from mmengine.config import Config
cfg = Config.fromfile({path!r})          # custom_imports=['hamseg'] runs here
import sys
assert 'hamseg' in sys.modules
from mmseg.registry import MODELS
import torch
head = MODELS.build(cfg.head)
out = head([torch.rand(1, 16, 9, 11)])
print(type(head).__module__, tuple(out.shape))
"""


def test_custom_imports_alone_registers_hamseg(tmp_path):
    config = tmp_path / "cfg.py"
    config.write_text(
        "custom_imports = dict(imports=['hamseg'], allow_failed_imports=False)\n"
        "head = dict(type='HamHead', in_channels=16, ham_channels=16, channels=8, num_classes=3,"
        " ham_cfg=dict(type='NMF', R=4))\n"
    )
    code = CUSTOM_IMPORTS_ONLY.format(path=str(config))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["hamseg.models.ham_head", "(1,", "3,", "9,", "11)"]


def test_hamseg_names_do_not_shadow_mmseg_or_mmengine():
    import mmengine.registry as engine_registry
    import mmseg.registry as seg_registry

    ours = {}
    for name in dir(seg_registry):
        registry = getattr(seg_registry, name)
        if not isinstance(registry, engine_registry.Registry):
            continue
        for key, cls in registry.module_dict.items():
            if getattr(cls, "__module__", "").startswith("hamseg."):
                ours[(name, key)] = cls
                parent = registry.parent
                assert parent is None or key not in parent.module_dict, (name, key)
    names = {key for _, key in ours}
    assert {"HamHead", "Hamburger", "NMF", "CD", "VQ", "CPUAmpOptimWrapper"} <= names
    assert "LightHamHead" not in names
