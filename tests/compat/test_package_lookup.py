"""``_base_ = 'mmseg::...'`` configs load, with and without pkg_resources."""

from __future__ import annotations

import os.path as osp
import subprocess
import sys

import mmseg
import pytest

import hamseg
from hamseg.compat import package_lookup
from tests.conftest import REPO

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


# ---- hamseg:: (configs carried by the package, hamseg/.mim/configs) ---------------------------

NMF_DEMO = "demo/hamhead-nmf_r18-d8_context-shapes.py"


def test_hamseg_base_config_builds_with_overrides(tmp_path):
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS

    config = tmp_path / "mine.py"
    config.write_text(
        f"_base_ = 'hamseg::{NMF_DEMO}'\nmodel = dict(decode_head=dict(num_classes=3))\n"
    )
    cfg = Config.fromfile(str(config))
    direct = Config.fromfile(osp.join(REPO, "configs", NMF_DEMO))
    assert "_scope_" not in cfg.pretty_text  # read like a relative base: no scope 'hamseg'
    direct.model.decode_head.num_classes = 3
    assert cfg.model.to_dict() == direct.model.to_dict() and cfg.default_scope == "mmseg"
    init_default_scope("mmseg")
    head = MODELS.build(cfg.model).decode_head
    assert type(head).__name__ == "HamHead" and head.conv_seg.out_channels == 3


def test_config_fromfile_and_hub_take_hamseg_names():
    from mmengine.config import Config
    from mmengine.hub import get_config

    direct = Config.fromfile(osp.join(REPO, "configs", NMF_DEMO)).to_dict()
    assert Config.fromfile(f"hamseg::{NMF_DEMO}").to_dict() == direct
    cfg = get_config(f"hamseg::{NMF_DEMO}", pretrained=True)  # via model-index.yml
    assert cfg.to_dict() | {"model_path": None} == direct | {"model_path": None}
    assert cfg.model_path == "work_dirs/demo/hamhead-nmf_r18-d8_context-shapes/iter_500.pth"
    with pytest.raises(FileNotFoundError, match="no hamseg config 'demo/nope.py'"):
        Config.fromfile("hamseg::demo/nope.py")


def test_hamseg_is_registered_with_mmengine_once():
    import mmengine.config.config as config_module
    from mmengine.config import Config
    from mmengine.config.utils import MODULE2PACKAGE, PKG2PROJECT
    from mmengine.utils import get_installed_path

    assert MODULE2PACKAGE["hamseg"] == PKG2PROJECT["hamseg"] == "hamseg"
    assert (
        get_installed_path("hamseg") == osp.dirname(hamseg.__file__) == package_lookup.PACKAGE_DIR
    )
    assert config_module.get_installed_path("mmsegmentation") == osp.dirname(mmseg.__file__)
    wrapped = (config_module.get_installed_path, Config.fromfile, Config._get_cfg_path)
    package_lookup.register_hamseg()
    assert (config_module.get_installed_path, Config.fromfile, Config._get_cfg_path) == wrapped


def test_checkout_links_the_top_level_configs_and_tools():
    mim = osp.join(osp.dirname(hamseg.__file__), ".mim")
    assert osp.samefile(osp.join(mim, "configs"), osp.join(REPO, "configs"))
    assert osp.samefile(osp.join(mim, "tools"), osp.join(REPO, "tools"))  # mim train/run hamseg
    assert osp.samefile(osp.join(mim, "model-index.yml"), osp.join(REPO, "model-index.yml"))


HAMSEG_CODE = """
import sys
{block}
import hamseg
from mmengine import Config
cfg = Config.fromfile({path!r})
print(cfg.model.decode_head.type, cfg.model.decode_head.num_classes)
"""


@pytest.mark.parametrize("block", ["", "sys.modules['pkg_resources'] = None"])
def test_hamseg_base_config_in_a_fresh_interpreter(tmp_path, block):
    config = tmp_path / "cfg.py"
    config.write_text(
        f"_base_ = 'hamseg::{NMF_DEMO}'\nmodel = dict(decode_head=dict(num_classes=4))\n"
    )
    code = HAMSEG_CODE.format(block=block, path=str(config))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["HamHead", "4"]
