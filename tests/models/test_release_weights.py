"""The release's ImageNet ResNet file -> mmseg ResNetV1c (init_cfg 'HamResNetPretrained')."""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmseg.registry import MODELS

from hamseg.models.release_weights import (
    HamResNetPretrained,
    WeightMappingError,
    map_state_dict,
    unwrap_state_dict,
)
from tests.conftest import REPO
from tests.tools.release_reference import DeepStemResNet, read_listing, synthetic_state_dict
from tests.helpers import one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

LISTING = osp.join(REPO, "tests", "tools", "data", "release_hamnet_r101_v2_nmf_state_dict.txt")
#: Release HamNet backbone names -> names of the ImageNet ResNet module they were taken from.
TO_IMAGENET = {"backbone.0.": "conv1.", "backbone.1.": "bn1."}
TO_IMAGENET.update({f"backbone.{i + 4}.": f"layer{i + 1}." for i in range(4)})


def imagenet_state_dict() -> dict[str, torch.Tensor]:
    """Synthetic resnet101-2a57e44d.pth: the listed backbone tensors under ImageNet names + fc."""
    rows = []
    for name, shape, dtype in read_listing(LISTING):
        for src, dst in TO_IMAGENET.items():
            if name.startswith(src):
                rows.append((dst + name[len(src) :], shape, dtype))
    rows += [("fc.weight", (1000, 2048), "float32"), ("fc.bias", (1000,), "float32")]
    return synthetic_state_dict(rows, seed=1)


def backbone_cfg(checkpoint: str) -> dict:
    cfg = Config.fromfile(osp.join(REPO, "configs", "ham_voc.py"))
    backbone = cfg.model.backbone
    backbone.norm_cfg = dict(type="BN", requires_grad=True)
    backbone.init_cfg = dict(type="HamResNetPretrained", checkpoint=checkpoint)
    return backbone


@pytest.fixture(scope="module")
def imagenet_file(tmp_path_factory):
    state = imagenet_state_dict()
    path = str(tmp_path_factory.mktemp("pretrained") / "resnet101-2a57e44d.pth")
    # as files written before PyTorch 0.4.1: no num_batches_tracked counters
    torch.save({k: v for k, v in state.items() if "num_batches_tracked" not in k}, path)
    return path, state


def test_imagenet_weights_give_the_release_backbone_function(imagenet_file):
    path, state = imagenet_file
    init_default_scope("mmseg")
    backbone = MODELS.build(backbone_cfg(path))
    backbone.init_weights()  # runs HamResNetPretrained through mmengine's initialize()
    loaded = backbone.state_dict()
    assert torch.equal(loaded["stem.7.running_var"], state["bn1.running_var"])
    assert torch.equal(loaded["stem.6.weight"], state["conv1.6.weight"])
    assert torch.equal(loaded["layer4.2.bn3.bias"], state["layer4.2.bn3.bias"])

    reference = DeepStemResNet().eval()
    reference.load_state_dict(state, strict=True)
    x = torch.randn(1, 3, 33, 41, generator=torch.Generator().manual_seed(0))
    backbone.eval()  # mmseg's ResNet.train() returns None: no chaining
    with torch.no_grad():
        expected = reference.features(x)
        got = backbone(x)[3]
    assert got.shape == expected.shape == (1, 2048, 5, 6)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5 * float(expected.abs().max()))


def test_missing_file_says_what_where_and_how(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the config's relative path does not exist here
    init_default_scope("mmseg")
    cfg = Config.fromfile(osp.join(REPO, "configs", "ham_voc.py"))
    model = MODELS.build(cfg.model)
    with pytest.raises(FileNotFoundError) as err:
        model.init_weights()
    message = str(err.value)
    assert "data/pretrained/resnet101-2a57e44d.pth" in message  # what and where
    assert "Enjoy-Hamburger" in message and "drive.google.com" in message  # how to get it
    assert "configs/ham_voc_v1c.py" in message  # the alternative


def test_wrong_file_is_rejected_with_names(tmp_path):
    state = imagenet_state_dict()
    del state["layer2.3.conv2.weight"]
    state["layer5.0.conv1.weight"] = torch.zeros(1)
    path = str(tmp_path / "wrong.pth")
    torch.save({"state_dict": state}, path)  # wrapped files are unwrapped
    init_default_scope("mmseg")
    backbone = MODELS.build(backbone_cfg(path))
    with pytest.raises(WeightMappingError) as err:
        HamResNetPretrained(path)(backbone)
    message = str(err.value)
    assert "unused: layer5.0.conv1.weight" in message
    assert "missing: layer2.3.conv2.weight" in message


def test_map_state_dict_rules():
    target = {"stem.0.weight": torch.zeros(2), "layer1.0.bn1.num_batches_tracked": torch.zeros(())}
    source = {"conv1.0.weight": torch.ones(2), "fc.bias": torch.ones(3)}
    rules = [("conv1.0.", "stem.0."), ("layer1.", "layer1.")]
    with pytest.raises(WeightMappingError, match="layer1.0.bn1.num_batches_tracked"):
        map_state_dict(source, target, rules, drop=["fc."])
    out = map_state_dict(source, target, rules, drop=["fc."], fill_num_batches_tracked=True)
    assert list(out) == list(target) and torch.equal(out["stem.0.weight"], torch.ones(2))
    with pytest.raises(WeightMappingError, match="fc.bias"):
        map_state_dict(source, target, rules, fill_num_batches_tracked=True)  # fc not dropped
    wrapped = {"module.a": torch.ones(1)}
    assert list(unwrap_state_dict({"net": wrapped})) == ["a"]
    with pytest.raises(TypeError, match="state dict"):
        unwrap_state_dict({"net": {"a": 1}})
