"""docs/usage.md, "HamHead in any mmseg config": each example (a block after
``<!-- config-example -->``) builds from mmseg's own config and runs; the two pitfalls it names
give the errors it quotes."""

from __future__ import annotations

import os.path as osp
import re

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmseg.registry import MODELS

import hamseg  # noqa: F401  (before mmseg)
from hamseg.models import HamHead
from tests.conftest import REPO
from tests.helpers import one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")
USAGE = osp.join(REPO, "docs", "usage.md")


def examples() -> list[str]:
    """The Python blocks that follow a ``<!-- config-example -->`` line."""
    text = open(USAGE, encoding="utf-8").read()
    return re.findall(r"<!-- config-example -->\n```python\n(.*?)```", text, re.S)


def read(tmp_path, source: str) -> Config:
    path = tmp_path / "example.py"
    path.write_text(source)
    return Config.fromfile(str(path))


def build(cfg: Config) -> torch.nn.Module:
    init_default_scope("mmseg")
    cfg.model.pretrained = None  # no ImageNet download
    torch.manual_seed(0)
    return MODELS.build(cfg.model)


@pytest.mark.parametrize("index", [0, 1])
def test_documented_examples_build_and_run(tmp_path, index):
    source = examples()[index]
    assert len(examples()) == 2
    model = build(read(tmp_path, source))
    head = model.decode_head
    assert isinstance(head, HamHead) and head.num_classes == (19, 150)[index]
    assert type(head.squeeze.bn).__name__ == "SyncBatchNorm"  # the base's norm, no _scope_
    model.eval()
    with torch.no_grad():
        result = model.predict(torch.randn(1, 3, 33, 41))[0]
    assert result.seg_logits.data.shape == (head.num_classes, 33, 41)
    assert torch.isfinite(result.seg_logits.data).all()


def test_without_delete_the_base_heads_keys_stop_the_build(tmp_path):
    source = examples()[0]
    assert "_delete_=True," in source
    cfg = read(tmp_path, re.sub(r"\n\s*_delete_=True,[^\n]*", "", source))
    assert cfg.model.decode_head.dilations == (1, 12, 24, 36)  # ASPPHead's, merged in
    with pytest.raises(TypeError, match="unexpected keyword argument 'dilations'"):
        build(cfg)


def test_base_norm_cfg_from_an_mmseg_base_carries_its_scope(tmp_path):
    source = examples()[1].replace("{{_base_.model.decode_head.norm_cfg}}", "{{_base_.norm_cfg}}")
    cfg = read(tmp_path, source)
    assert cfg.model.decode_head.norm_cfg._scope_ == "mmseg"
    with pytest.raises(TypeError, match="unexpected keyword argument '_scope_'"):
        build(cfg)
