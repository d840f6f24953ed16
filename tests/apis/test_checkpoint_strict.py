"""hamseg.apis.checkpoint: a checkpoint loads only if it fills the model exactly; else one line."""

from __future__ import annotations

import pytest
import torch
from mmseg.models import SegTTAModel
from torch import nn

from hamseg.apis import init_model
from hamseg.apis.checkpoint import (
    CheckpointMismatchError,
    check_checkpoint_file,
    check_state_dict,
    load_checkpoint_strict,
    reinitialised_by_load_from,
)
from hamseg.cli import run_cli
from hamseg.utils.errors import UsageError
from tests.helpers import DEMO_NMF, make_checkpoint


class _Head(nn.Module):
    def __init__(self, num_classes: int, width: int = 4) -> None:
        super().__init__()
        self.align = nn.Conv2d(3, width, 3)
        self.bn = nn.BatchNorm2d(width)
        self.conv_seg = nn.Conv2d(width, num_classes, 1)


class _Segmentor(nn.Module):
    def __init__(self, num_classes: int, width: int = 4) -> None:
        super().__init__()
        self.decode_head = _Head(num_classes, width)

    def test_step(self, data):  # what a TTA model requires of the model it wraps
        return data


def _save(model: nn.Module, path) -> str:
    torch.save(dict(meta=dict(), state_dict=model.state_dict()), path)
    return str(path)


def test_exact_fit_loads_every_tensor(tmp_path):
    torch.manual_seed(0)
    src = _Segmentor(3)
    src.decode_head.bn.running_mean.uniform_()
    dst = _Segmentor(3)
    ckpt = load_checkpoint_strict(dst, _save(src, tmp_path / "a.pth"))
    assert set(ckpt) == {"meta", "state_dict"}
    for k, v in src.state_dict().items():
        assert torch.equal(dst.state_dict()[k], v), k


def test_class_count_mismatch_is_one_line_naming_layer_shapes_and_classes(tmp_path):
    path = _save(_Segmentor(3), tmp_path / "three.pth")
    model = _Segmentor(5)
    before = model.decode_head.conv_seg.weight.clone()
    with pytest.raises(CheckpointMismatchError) as err:
        load_checkpoint_strict(model, path)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"checkpoint {path!r} does not fit the model: ")
    assert (
        "decode_head.conv_seg.weight is (3, 4, 1, 1) in the checkpoint and (5, 4, 1, 1) in the "
        "model: the checkpoint has 3 classes, the config has 5" in msg
    )
    assert "other shape mismatches: decode_head.conv_seg.bias" in msg
    assert torch.equal(model.decode_head.conv_seg.weight, before)  # nothing was loaded
    assert isinstance(err.value, UsageError)


def test_other_shape_mismatch_names_the_layer_without_classes():
    model, other = _Segmentor(3, width=4).state_dict(), _Segmentor(3, width=6).state_dict()
    ckpt = {k: v for k, v in other.items() if not k.startswith("decode_head.conv_seg")}
    ckpt.update({k: v for k, v in model.items() if k.startswith("decode_head.conv_seg")})
    with pytest.raises(CheckpointMismatchError) as err:
        check_state_dict(model, ckpt, "x.pth")
    msg = str(err.value)
    assert "decode_head.align.weight is (6, 3, 3, 3) in the checkpoint and (4, 3, 3, 3) in" in msg
    assert "classes" not in msg
    others = "decode_head.align.bias, decode_head.bn.weight, decode_head.bn.bias and 2 more"
    assert f"; other shape mismatches: {others}" in msg


def test_classifier_of_the_same_class_count_with_other_inputs_names_no_classes(tmp_path):
    """Only the classifier's input channels differ (4 vs 6): the layer and both shapes, and no
    "the checkpoint has 3 classes, the config has 3" sentence."""
    model, wider = _Segmentor(3, width=4).state_dict(), _Segmentor(3, width=6).state_dict()
    ckpt = dict(model, **{"decode_head.conv_seg.weight": wider["decode_head.conv_seg.weight"]})
    with pytest.raises(CheckpointMismatchError) as err:
        check_state_dict(model, ckpt, "x.pth")
    assert str(err.value) == (
        "checkpoint 'x.pth' does not fit the model: decode_head.conv_seg.weight is (3, 6, 1, 1) "
        "in the checkpoint and (3, 4, 1, 1) in the model"
    )
    path = str(tmp_path / "wide.pth")
    torch.save(dict(meta={}, state_dict=ckpt), path)
    assert reinitialised_by_load_from(_Segmentor(3, width=4), path) == (
        f"load_from {path!r}: decode_head.conv_seg.weight keep their fresh init (shape differs); "
        "every other tensor is loaded"
    )


def test_a_classifier_of_another_class_count_is_named_before_other_mismatches():
    model = _Segmentor(5, width=4).state_dict()
    ckpt = _Segmentor(3, width=6).state_dict()  # align, bn and both classifier tensors differ
    with pytest.raises(CheckpointMismatchError) as err:
        check_state_dict(model, ckpt, "x.pth")
    assert str(err.value).startswith(
        "checkpoint 'x.pth' does not fit the model: decode_head.conv_seg.weight is (3, 6, 1, 1) "
        "in the checkpoint and (5, 4, 1, 1) in the model: the checkpoint has 3 classes, the "
        "config has 5 ("
    )


def test_missing_and_unexpected_tensors_are_errors():
    model = _Segmentor(3).state_dict()
    ckpt = dict(model)
    del ckpt["decode_head.bn.running_var"]
    ckpt["auxiliary_head.conv_seg.weight"] = torch.zeros(3, 4, 1, 1)
    with pytest.raises(CheckpointMismatchError) as err:
        check_state_dict(model, ckpt, "x.pth")
    msg = str(err.value)
    assert "1 model tensors are not in the checkpoint (decode_head.bn.running_var)" in msg
    assert "1 checkpoint tensors are not in the model (auxiliary_head.conv_seg.weight)" in msg
    assert "pass its config" in msg and "\n" not in msg
    check_state_dict(model, dict(model), "x.pth")  # an exact match passes


def test_prefix_and_wrappers_are_unwrapped(tmp_path):
    src = _Segmentor(3)
    path = str(tmp_path / "dp.pth")
    torch.save({f"module.{k}": v for k, v in src.state_dict().items()}, path)  # bare, DP prefix
    dst = _Segmentor(3)
    load_checkpoint_strict(dst, path)
    assert torch.equal(dst.decode_head.conv_seg.weight, src.decode_head.conv_seg.weight)
    tta = SegTTAModel(module=_Segmentor(3))  # --tta wraps the segmentor; loads into .module
    load_checkpoint_strict(tta, path)
    assert torch.equal(tta.module.decode_head.conv_seg.bias, src.decode_head.conv_seg.bias)
    with pytest.raises(CheckpointMismatchError, match="has 3 classes, the config has 5"):
        load_checkpoint_strict(SegTTAModel(module=_Segmentor(5)), path)
    torch.save(dict(meta={}, step=3), path)
    with pytest.raises(CheckpointMismatchError, match="holds no state dict"):
        load_checkpoint_strict(dst, path)


def test_run_cli_prints_one_line_and_exits_2(tmp_path, capsys):
    path = _save(_Segmentor(3), tmp_path / "three.pth")

    def main() -> None:
        load_checkpoint_strict(_Segmentor(5), path)

    with pytest.raises(SystemExit) as exit_info:
        run_cli(main)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: checkpoint ")
    assert "the checkpoint has 3 classes, the config has 5" in err


def test_init_model_refuses_a_checkpoint_of_another_class_count(tmp_path):
    ckpt = make_checkpoint(str(tmp_path / "three.pth"), num_classes=3)
    cfg = tmp_path / "five.py"
    cfg.write_text(f"_base_ = [{DEMO_NMF!r}]\nmodel = dict(decode_head=dict(num_classes=5))\n")
    with pytest.raises(CheckpointMismatchError, match="has 3 classes, the config has 5"):
        init_model(str(cfg), ckpt, device="cpu")
    model = init_model(None, ckpt, device="cpu")  # with its own stored config it fits
    assert model.decode_head.conv_seg.out_channels == 3
    assert model.dataset_meta["classes"] == ["class 0", "class 1", "class 2"]


def test_check_checkpoint_file_does_not_load_and_sees_through_tta(tmp_path):
    path = _save(_Segmentor(3), tmp_path / "three.pth")
    model = _Segmentor(5)
    before = model.decode_head.align.weight.clone()
    with pytest.raises(
        CheckpointMismatchError, match=r"the checkpoint has 3 classes, the config has 5"
    ):
        check_checkpoint_file(SegTTAModel(module=model), path)
    check_checkpoint_file(_Segmentor(3), path)  # fits: no error
    assert torch.equal(model.decode_head.align.weight, before)  # nothing was loaded


def test_reinitialised_by_load_from_names_what_keeps_its_init(tmp_path):
    path = _save(_Segmentor(3), tmp_path / "three.pth")
    assert reinitialised_by_load_from(_Segmentor(3), path) is None
    assert reinitialised_by_load_from(_Segmentor(5), path) == (
        f"load_from {path!r}: decode_head.conv_seg.weight, decode_head.conv_seg.bias keep their "
        "fresh init (shape differs: the checkpoint has 3 classes, the config has 5); every other "
        "tensor is loaded"
    )
    wider = reinitialised_by_load_from(_Segmentor(3, width=6), path)
    assert "decode_head.align.weight, decode_head.align.bias, decode_head.bn.weight and" in wider
