"""``_base_ = 'mmseg::...'`` configs load, with and without pkg_resources."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
{block}
import hamseg
from hamseg import compat
from mmengine import Config
cfg = Config.fromfile({path!r})
print(compat.PKG_RESOURCES_REPLACED, cfg.model.type, cfg.model.backbone.depth, cfg.crop_size)
"""


def load_in_fresh_interpreter(tmp_path, block: str) -> str:
    config = tmp_path / "cfg.py"
    config.write_text(
        "_base_ = ['mmseg::_base_/models/pspnet_r50-d8.py',"
        " 'mmseg::_base_/datasets/pascal_voc12_aug.py']\n"
        "model = dict(backbone=dict(depth=101))\n"
    )
    code = CODE.format(block=block, path=str(config))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.split()


def test_mmseg_base_config_loads(tmp_path):
    replaced, model, depth, *_ = load_in_fresh_interpreter(tmp_path, "")
    assert (replaced, model, depth) == ("False", "EncoderDecoder", "101")


def test_mmseg_base_config_loads_without_pkg_resources(tmp_path):
    block = "sys.modules['pkg_resources'] = None  # as with setuptools >= 81"
    replaced, model, depth, *_ = load_in_fresh_interpreter(tmp_path, block)
    assert (replaced, model, depth) == ("True", "EncoderDecoder", "101")
