"""The release in mmseg's names (hamseg/models/release_weights.py): its ImageNet ResNet file ->
ResNetV1c (init_cfg 'HamResNetPretrained'), its HamNet checkpoint -> configs/ham_voc.py
(tools/convert_release_checkpoint.py), strictly.

The weights are synthetic, made from the released checkpoint's names and shapes
(tests/tools/data/, a copy of shared/reference/official-hamnet-r101-v2-nmf-state-dict.txt). The
released network is rebuilt in plain PyTorch from the facts (tests/tools/release_reference.py);
loading the same weights into it and into the mmseg model must give the same function.
"""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import os.path as osp
import subprocess
import sys

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner import load_checkpoint
from mmseg.registry import MODELS

from hamseg.models.release_weights import (
    RELEASE_HAMNET_RULES,
    HamResNetPretrained,
    convert_release_checkpoint,
    map_state_dict,
    unwrap_state_dict,
)
from hamseg.utils.errors import UsageError
from tests.conftest import REPO
from tests.helpers import one_thread  # noqa: F401  (one_thread: fixture)
from tests.tools.release_reference import (
    DeepStemResNet,
    ReleaseHamNet,
    read_listing,
    synthetic_state_dict,
)

pytestmark = pytest.mark.usefixtures("one_thread")

LISTING = osp.join(REPO, "tests", "tools", "data", "release_hamnet_r101_v2_nmf_state_dict.txt")
HAM_VOC = osp.join(REPO, "configs", "ham_voc.py")
#: Release HamNet backbone names -> names of the ImageNet ResNet module they were taken from.
TO_IMAGENET = {"backbone.0.": "conv1.", "backbone.1.": "bn1."}
TO_IMAGENET.update({f"backbone.{i + 4}.": f"layer{i + 1}." for i in range(4)})


@pytest.fixture(scope="module")
def release_state():
    rows = read_listing(LISTING)
    assert len(rows) == 659
    return synthetic_state_dict(rows)


@pytest.fixture(scope="module")
def voc_model():
    """configs/ham_voc.py's segmentor (pretrained init off), eval mode."""
    cfg = Config.fromfile(HAM_VOC)
    cfg.model.backbone.init_cfg = None
    init_default_scope("mmseg")
    return MODELS.build(cfg.model).eval()


def convert(source, model):
    state = map_state_dict(source, model.state_dict(), RELEASE_HAMNET_RULES)
    model.load_state_dict(state, strict=True)
    return state


def test_listing_is_the_release_architecture(release_state):
    # The plain-torch rebuild from the facts has exactly the released names and shapes.
    ReleaseHamNet().load_state_dict(release_state, strict=True)


def test_every_tensor_used_once_and_loaded_strictly(release_state, voc_model):
    state = convert(release_state, voc_model)
    assert len(state) == len(release_state) == 659
    assert {id(t) for t in state.values()} == {id(t) for t in release_state.values()}
    assert state["backbone.stem.7.running_var"] is release_state["backbone.1.running_var"]
    assert state["backbone.layer3.22.conv2.weight"] is release_state["backbone.6.22.conv2.weight"]
    assert state["decode_head.conv_seg.bias"] is release_state["fc.1.bias"]
    assert (
        state["decode_head.hamburger.lower_bread.0.bias"]
        is release_state["hamburger.lower_bread.0.bias"]
    )
    loaded = voc_model.state_dict()
    assert torch.equal(
        loaded["decode_head.squeeze.conv.weight"], release_state["squeeze.conv.weight"]
    )


def test_renamed_key_fails_with_its_name(release_state, voc_model):
    bad = dict(release_state)
    bad["align.conv.weights"] = bad.pop("align.conv.weight")
    with pytest.raises(UsageError) as err:
        convert(bad, voc_model)
    message = str(err.value)
    assert "align.conv.weights -> decode_head.align.conv.weights" in message
    assert "missing: decode_head.align.conv.weight" in message


def test_unused_missing_and_misshaped_tensors_are_listed(release_state, voc_model):
    bad = dict(release_state)
    bad["aux.conv.weight"] = torch.zeros(1)  # no rule maps it
    del bad["fc.1.bias"]
    bad["hamburger.upper_bread.weight"] = torch.zeros(512, 256, 1, 1)
    with pytest.raises(UsageError) as err:
        convert(bad, voc_model)
    message = str(err.value)
    assert "unused: aux.conv.weight" in message
    assert "missing: decode_head.conv_seg.bias" in message
    assert "hamburger.upper_bread.weight (512, 256, 1, 1) -> (512, 512, 1, 1)" in message


def test_convert_writes_a_checkpoint_that_loads_strictly(release_state, voc_model, tmp_path):
    src, dst = str(tmp_path / "final.pth"), str(tmp_path / "out" / "hamnet.pth")
    torch.save(dict(net=release_state, step=60000, best_mIoU=0.8), src)
    assert convert_release_checkpoint(src, dst, HAM_VOC) == 659
    saved = torch.load(dst, map_location="cpu", weights_only=True)
    assert set(saved["state_dict"]) == set(voc_model.state_dict())
    assert saved["meta"] == dict(source="final.pth", config=HAM_VOC)
    load_checkpoint(voc_model, dst, strict=True)  # mmengine's loader, as tools/test.py uses it
    assert torch.equal(voc_model.decode_head.conv_seg.weight, release_state["fc.1.weight"])

    torch.save(release_state, src)  # a bare state dict is not the release's format
    with pytest.raises(UsageError, match=r"\{'net': state_dict"):
        convert_release_checkpoint(src, dst, HAM_VOC)


def test_converted_model_computes_the_release_function(release_state, voc_model):
    reference = ReleaseHamNet().eval()
    reference.load_state_dict(release_state, strict=True)
    convert(release_state, voc_model)
    ham = voc_model.decode_head.hamburger.ham
    ham.eval_seed, ham.eval_draws = None, 1  # the release: one draw of the global RNG
    for h, w in [(33, 41), (18, 22)]:  # 8k+1 and other sizes
        x = torch.randn(1, 3, h, w, generator=torch.Generator().manual_seed(h))
        with torch.no_grad():
            torch.manual_seed(7)  # the NMF's random bases: same draw in both
            expected = reference(x)
            torch.manual_seed(7)
            meta = dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w))
            got = voc_model.encode_decode(x, [meta])
        assert got.shape == expected.shape == (1, 21, h, w)
        scale = expected.abs().max()
        assert scale > 1e-3  # a non-degenerate function
        # float32 rounding only (a wrong dilation or stem gives errors of 1e-2 .. 1e-1 * scale)
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-5 * float(scale))
        # and the random bases matter: another draw changes the output
        torch.manual_seed(8)
        with torch.no_grad():
            other = voc_model.encode_decode(x, [meta])
        assert (other - expected).abs().max() > 1e-6 * scale


@pytest.mark.slow
def test_cli_converts_and_a_missing_file_is_one_line(release_state, tmp_path):
    src, dst = tmp_path / "final.pth", tmp_path / "o.pth"
    tool = osp.join(REPO, "tools", "convert_release_checkpoint.py")
    cmd = [sys.executable, tool, str(src), str(dst)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert str(src) in line and "release checkpoint" in line and not dst.exists()
    torch.save(dict(net=release_state), src)
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "converted 659 tensors" in proc.stdout and dst.exists()


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
    backbone = Config.fromfile(HAM_VOC).model.backbone
    backbone.norm_cfg = dict(type="BN", requires_grad=True)
    backbone.init_cfg = dict(type="HamResNetPretrained", checkpoint=checkpoint)
    return backbone


def test_imagenet_weights_give_the_release_backbone_function(tmp_path):
    state = imagenet_state_dict()
    path = str(tmp_path / "resnet101-2a57e44d.pth")
    # as files written before PyTorch 0.4.1: no num_batches_tracked counters
    torch.save({k: v for k, v in state.items() if "num_batches_tracked" not in k}, path)
    init_default_scope("mmseg")
    backbone = MODELS.build(backbone_cfg(path))
    backbone.init_weights()  # runs HamResNetPretrained through mmengine's initialize()
    loaded = backbone.state_dict()
    assert torch.equal(loaded["stem.7.running_var"], state["bn1.running_var"])
    assert torch.equal(loaded["stem.6.weight"], state["conv1.6.weight"])
    reference = DeepStemResNet().eval()
    reference.load_state_dict(state, strict=True)
    x = torch.randn(1, 3, 33, 41, generator=torch.Generator().manual_seed(0))
    backbone.eval()  # mmseg's ResNet.train() returns None: no chaining
    with torch.no_grad():
        expected = reference.features(x)
        got = backbone(x)[3]
    assert got.shape == expected.shape == (1, 2048, 5, 6)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5 * float(expected.abs().max()))


def test_imagenet_file_missing_or_wrong_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the config's relative path does not exist here
    init_default_scope("mmseg")
    model = MODELS.build(Config.fromfile(HAM_VOC).model)
    with pytest.raises(FileNotFoundError) as err:
        model.init_weights()
    assert "data/pretrained/resnet101-2a57e44d.pth" in str(err.value)
    assert "docs/recipes.md" in str(err.value)
    state = imagenet_state_dict()
    del state["layer2.3.conv2.weight"]
    state["layer5.0.conv1.weight"] = torch.zeros(1)
    torch.save({"state_dict": state}, "wrong.pth")  # wrapped files are unwrapped
    with pytest.raises(UsageError) as err:
        HamResNetPretrained("wrong.pth")(MODELS.build(backbone_cfg("wrong.pth")))
    assert "unused: layer5.0.conv1.weight" in str(err.value)
    assert "missing: layer2.3.conv2.weight" in str(err.value)


def test_map_state_dict_rules():
    target = {"stem.0.weight": torch.zeros(2), "layer1.0.bn1.num_batches_tracked": torch.zeros(())}
    source = {"conv1.0.weight": torch.ones(2), "fc.bias": torch.ones(3)}
    rules = [("conv1.0.", "stem.0."), ("layer1.", "layer1.")]
    with pytest.raises(UsageError, match="layer1.0.bn1.num_batches_tracked"):
        map_state_dict(source, target, rules, drop=["fc."])
    out = map_state_dict(source, target, rules, drop=["fc."], fill_counters=True)
    assert list(out) == list(target) and torch.equal(out["stem.0.weight"], torch.ones(2))
    with pytest.raises(UsageError, match="fc.bias"):
        map_state_dict(source, target, rules, fill_counters=True)  # fc not dropped
    assert list(unwrap_state_dict({"net": {"module.a": torch.ones(1)}})) == ["a"]
    with pytest.raises(TypeError, match="state dict"):
        unwrap_state_dict({"net": {"a": 1}})
