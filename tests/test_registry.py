"""hamseg in mmseg's registries: `import hamseg` and `custom_imports=['hamseg']` register its
modules, its names shadow none of mmseg's, and its registry nodes (scope 'hamseg') make
``hamseg::`` names work in mmengine's hub and DefaultScope as ``mmseg::`` ones do."""

import subprocess
import sys

from tests.conftest import REPO

GET_MODEL = """
import hamseg, warnings
from mmengine.hub import get_config, get_model
from mmengine.registry import DefaultScope, HOOKS, METRICS, MODELS, VISUALIZERS
model = get_model("hamseg::demo/hamhead-nmf_r18-d8_context-shapes.py")
print(type(model).__name__, type(model.decode_head).__name__, model.decode_head.num_classes)
print(get_config("hamseg::demo/hamhead-nmf_r18-d8_context-shapes.py", True).model_path)
print(DefaultScope.get_current_instance())
from hamseg.utils import register_all_modules
register_all_modules()
print(DefaultScope.get_current_instance().scope_name)
head = MODELS.build(dict(type="HamHead", in_channels=8, ham_channels=8, channels=8, num_classes=3))
from mmseg.registry import MODELS as SEG
print(type(head).__module__, SEG.get("hamseg.EncoderDecoder").__module__)
NAMES = ("PreemptionHook", "IoUMetric", "SegLocalVisualizer")
for root, name in zip((HOOKS, METRICS, VISUALIZERS), NAMES):
    with root.switch_scope_and_registry(None) as node:  # as the Runner builds
        print(node.scope, node.get(name).__name__)
"""


def test_get_model_get_config_and_default_scope_hamseg():
    out = subprocess.run(
        [sys.executable, "-c", GET_MODEL], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == [
        "EncoderDecoder HamHead 7",
        "work_dirs/demo/hamhead-nmf_r18-d8_context-shapes/iter_500.pth",
        "None",
        "hamseg",
        "hamseg.models.ham_head mmseg.models.segmentors.encoder_decoder",
        "hamseg PreemptionHook",
        "hamseg IoUMetric",
        "hamseg SegLocalVisualizer",
    ]


def test_every_mmseg_registry_has_a_hamseg_child():
    import mmseg.registry as mmseg_registry

    import hamseg.registry as ours

    for name in mmseg_registry.__all__:
        node = getattr(ours, name)
        assert (node.scope, node.parent) == ("hamseg", getattr(mmseg_registry, name)), name
        assert node.parent._children["hamseg"] is node


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
