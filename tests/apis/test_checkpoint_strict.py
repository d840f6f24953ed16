"""hamseg.apis.checkpoint: a checkpoint loads only if it fills the model exactly; else one line
naming the layer, both shapes and, for a classifier, both class counts."""

from __future__ import annotations

import pytest
import torch
from mmseg.models import SegTTAModel
from torch import nn

from hamseg.apis.checkpoint import CheckpointMismatchError, check_checkpoint, check_checkpoint_file
from hamseg.cli import run_cli
from hamseg.utils.errors import UsageError


class _Head(nn.Module):
    def __init__(self, num_classes: int, width: int) -> None:
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


def _error(model: nn.Module, checkpoint) -> str:
    with pytest.raises(CheckpointMismatchError) as err:
        check_checkpoint(model, checkpoint, "x.pth")
    assert "\n" not in str(err.value) and isinstance(err.value, UsageError)
    return str(err.value)


def test_an_exact_fit_gives_every_tensor_through_wrappers_and_prefixes(tmp_path):
    torch.manual_seed(0)
    src = _Segmentor(3)
    src.decode_head.bn.running_mean.uniform_()
    for dst, checkpoint in (
        (_Segmentor(3), dict(meta={}, state_dict=src.state_dict())),
        (
            SegTTAModel(module=_Segmentor(3)),
            {f"module.{k}": v for k, v in src.state_dict().items()},
        ),
    ):
        state = check_checkpoint(dst, checkpoint, "x.pth")
        assert all(torch.equal(state[k], v) for k, v in src.state_dict().items())


def test_a_classifier_of_another_class_count_is_named_first_another_width_names_no_counts():
    message = _error(_Segmentor(5, width=4), _Segmentor(3, width=6).state_dict())
    assert message.index("decode_head.conv_seg.weight") < message.index("decode_head.align")
    assert "(3, 6, 1, 1)" in message and "(5, 4, 1, 1)" in message and "'x.pth'" in message
    assert "has 3 classes, the config has 5" in message and "num_classes=3" in message
    assert "decode_head.conv_seg.bias" in message  # the other mismatches, named after it
    wider = dict(
        _Segmentor(3).state_dict(), **{"decode_head.conv_seg.weight": torch.zeros(3, 6, 1, 1)}
    )
    message = _error(_Segmentor(3), wider)  # the classifier's inputs differ, not its classes
    assert "(3, 6, 1, 1)" in message and "(3, 4, 1, 1)" in message and "classes" not in message


def test_missing_unexpected_and_no_state_dict_are_errors():
    model = _Segmentor(3)
    state = dict(model.state_dict())
    del state["decode_head.bn.running_var"]
    state["auxiliary_head.conv_seg.weight"] = torch.zeros(3, 4, 1, 1)
    message = _error(model, state)
    assert "decode_head.bn.running_var" in message and "auxiliary_head.conv_seg.weight" in message
    assert "holds no state dict" in _error(model, dict(meta={}, step=3))
    assert check_checkpoint(model, model.state_dict(), "x.pth").keys() == model.state_dict().keys()


def test_a_file_is_checked_through_tta_loading_nothing_one_line_under_run_cli(tmp_path, capsys):
    path = str(tmp_path / "three.pth")
    torch.save(dict(meta=dict(), state_dict=_Segmentor(3).state_dict()), path)
    model = _Segmentor(5)
    before = model.decode_head.align.weight.clone()
    check_checkpoint_file(_Segmentor(3), path)
    with pytest.raises(SystemExit) as stop:
        run_cli(lambda: check_checkpoint_file(SegTTAModel(module=model), path))
    assert torch.equal(model.decode_head.align.weight, before)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith("error: ")
    assert "three.pth" in err and "has 3 classes, the config has 5" in err
