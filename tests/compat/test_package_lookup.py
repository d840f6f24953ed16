"""Config names across packages: ``_base_ = 'mmseg::...'`` with and without pkg_resources, and
hamseg's packaged configs by ``hamseg::`` name (hamseg.compat.package_lookup)."""

import os.path as osp
import subprocess
import sys

import pytest
from mmengine.config import Config

import hamseg
from hamseg.compat import package_lookup
from tests.conftest import REPO

NMF_DEMO = "demo/hamhead-nmf_r18-d8_context-shapes.py"
CODE = """
import sys
{block}
import hamseg
from mmengine import Config
mmseg, ours = Config.fromfile({mmseg!r}), Config.fromfile({ours!r})
print(hamseg.compat.PKG_RESOURCES_REPLACED, mmseg.model.backbone.depth, ours.model.decode_head.type)
"""


@pytest.mark.parametrize("block", ["", "sys.modules['pkg_resources'] = None  # setuptools >= 81"])
def test_mmseg_and_hamseg_bases_load_in_a_fresh_interpreter(tmp_path, block):
    mmseg, ours = tmp_path / "mmseg.py", tmp_path / "ours.py"
    mmseg.write_text(
        "_base_ = 'mmseg::_base_/models/pspnet_r50-d8.py'\nmodel = dict(backbone=dict(depth=101))\n"
    )
    ours.write_text(f"_base_ = 'hamseg::{NMF_DEMO}'\n")
    code = CODE.format(block=block, mmseg=str(mmseg), ours=str(ours))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == [str(bool(block)), "101", "HamHead"]


def test_a_hamseg_base_builds_with_overrides(tmp_path):
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS

    config = tmp_path / "mine.py"
    config.write_text(
        f"_base_ = 'hamseg::{NMF_DEMO}'\nmodel = dict(decode_head=dict(num_classes=3))\n"
    )
    cfg = Config.fromfile(str(config))
    assert "_scope_" not in cfg.pretty_text  # read like a relative base: no scope 'hamseg'
    init_default_scope("mmseg")
    head = MODELS.build(cfg.model).decode_head
    assert type(head).__name__ == "HamHead" and head.conv_seg.out_channels == 3


def test_config_fromfile_and_the_hub_take_hamseg_names():
    from mmengine.hub import get_config

    direct = Config.fromfile(osp.join(REPO, "configs", NMF_DEMO)).to_dict()
    assert Config.fromfile(f"hamseg::{NMF_DEMO}").to_dict() == direct
    cfg = get_config(f"hamseg::{NMF_DEMO}", pretrained=True)  # via model-index.yml
    assert cfg.model_path == "work_dirs/demo/hamhead-nmf_r18-d8_context-shapes/iter_500.pth"
    with pytest.raises(FileNotFoundError, match='demo/nope.py" does not exist'):
        Config.fromfile("hamseg::demo/nope.py")
    wrapped = (Config.fromfile, Config._get_cfg_path)
    package_lookup.register_hamseg()  # once
    assert (Config.fromfile, Config._get_cfg_path) == wrapped


def test_checkout_links_the_top_level_configs_and_tools():
    mim = osp.join(osp.dirname(hamseg.__file__), ".mim")
    assert osp.samefile(osp.join(mim, "configs"), osp.join(REPO, "configs"))
    assert osp.samefile(osp.join(mim, "tools"), osp.join(REPO, "tools"))  # mim train/run hamseg
    assert osp.samefile(osp.join(mim, "model-index.yml"), osp.join(REPO, "model-index.yml"))
