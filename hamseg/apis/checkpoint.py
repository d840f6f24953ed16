"""Strict checkpoint loading: mmengine's ``load_checkpoint`` loads with ``strict=False`` (a
classifier of another class count stays random); here any mismatch is a one-line
:class:`CheckpointMismatchError` naming the layer, shapes, class counts (docs/robustness.md)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mmengine.model import BaseTTAModel, is_model_wrapper
from torch import Tensor, nn

from hamseg.compat.checkpoint import load_checkpoint_file
from hamseg.models.release_weights import unwrap_state_dict
from hamseg.utils.errors import UsageError

#: A classifier's tensors: mmseg's decode and auxiliary heads name their last 1x1 conv conv_seg.
_CLASSIFIER = re.compile(r"(^|\.)conv_seg\.(weight|bias)$")
State = Mapping[str, Tensor]


class CheckpointMismatchError(UsageError):
    """A checkpoint does not fit the model exactly; the one-line message says where and how."""


def _names(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _class_counts(name: str, have: State, want: State) -> tuple[int, int] | None:
    """(checkpoint's, model's) class count of a classifier tensor whose output channels differ."""
    counts = (have[name].shape[0], want[name].shape[0])
    return counts if _CLASSIFIER.search(name) and counts[0] != counts[1] else None


def _diff(own: State, state: State) -> tuple[list[str], list[str], list[str]]:
    """(misshaped, missing, unexpected) names of ``state`` against the model's ``own``."""
    misshaped = [k for k in own if k in state and state[k].shape != own[k].shape]
    return misshaped, [k for k in own if k not in state], [k for k in state if k not in own]


def check_state_dict(model_state: State, checkpoint_state: State, source: str) -> None:
    """Raise unless ``checkpoint_state`` has exactly the names and shapes of ``model_state``.

    Raises:
        CheckpointMismatchError: One line: shape mismatches (a classifier's first), then the
            names the checkpoint lacks, then those the model does not have.
    """
    misshaped, missing, unexpected = _diff(model_state, checkpoint_state)
    if 2 * max(len(missing), len(unexpected)) > len(model_state):  # not the same network
        raise CheckpointMismatchError(
            f"checkpoint {source!r} is of another architecture: {len(missing)} of the model's "
            f"{len(model_state)} tensors are not in it ({_names(missing)}) and {len(unexpected)}"
            f" of its tensors are not in the model ({_names(unexpected)}); pass its config"
        )
    parts = []
    if misshaped:
        first = next(
            (k for k in misshaped if _class_counts(k, checkpoint_state, model_state)),
            next((k for k in misshaped if _CLASSIFIER.search(k)), misshaped[0]),
        )
        parts.append(
            f"{first} is {tuple(checkpoint_state[first].shape)} in the checkpoint and "
            f"{tuple(model_state[first].shape)} in the model"
        )
        classes = _class_counts(first, checkpoint_state, model_state)
        if classes is not None:
            have, want = classes
            parts[0] += (
                f": the checkpoint has {have} classes, the config has {want} (to use this "
                f"checkpoint, set num_classes={have} in the config; to train a {want}-class "
                "model from it, fine-tune with load_from)"
            )
        if len(misshaped) > 1:
            parts[0] += f"; other shape mismatches: {_names([k for k in misshaped if k != first])}"
    if missing:
        parts.append(f"{len(missing)} model tensors are not in the checkpoint ({_names(missing)})")
    if unexpected:
        parts.append(
            f"{len(unexpected)} checkpoint tensors are not in the model ({_names(unexpected)})"
        )
    if parts:
        hint = "" if misshaped else " (is it a checkpoint of another model? pass its config)"
        raise CheckpointMismatchError(
            f"checkpoint {source!r} does not fit the model: " + "; ".join(parts) + hint
        )


def _unwrap(model: nn.Module) -> nn.Module:
    """The segmentor inside a DDP (or other mmengine) wrapper or a TTA model."""
    while is_model_wrapper(model) or isinstance(model, BaseTTAModel):
        model = model.module
    return model


def _state(checkpoint: Any, source: str) -> State:
    """The state dict in a loaded checkpoint (see ``unwrap_state_dict``)."""
    try:
        return unwrap_state_dict(checkpoint)
    except TypeError as err:
        raise CheckpointMismatchError(f"checkpoint {source!r} holds no state dict: {err}") from None


def check_checkpoint_file(model: nn.Module, filename: str) -> None:
    """:func:`check_state_dict` of a checkpoint file, without loading it (``tools/test.py``
    calls it before mmengine's runner loads the file non-strictly)."""
    state = _state(load_checkpoint_file(filename), filename)
    check_state_dict(_unwrap(model).state_dict(), state, filename)


def reinitialised_by_load_from(model: nn.Module, filename: str) -> str | None:
    """What fine-tuning from ``filename`` (mmengine's non-strict ``load_from``) leaves at its
    fresh init, as one line for ``tools/train.py`` to log; None if everything loads."""
    state = _state(load_checkpoint_file(filename), filename)
    own = _unwrap(model).state_dict()
    changed, missing, _ = _diff(own, state)
    parts = []
    if changed:
        counts = next(filter(None, (_class_counts(k, state, own) for k in changed)), None)
        classes = ": the checkpoint has {} classes, the config has {}".format(*counts or (0, 0))
        parts.append(
            f"{_names(changed)} keep their fresh init (shape differs{classes if counts else ''})"
        )
    if missing:
        parts.append(f"{_names(missing)} are not in the checkpoint (fresh init)")
    if not parts:
        return None
    return f"load_from {filename!r}: " + "; ".join(parts) + "; every other tensor is loaded"


def load_state_dict_strict(model: nn.Module, checkpoint: Any, source: str) -> None:
    """Load a loaded checkpoint (a state dict or a dict holding one) into ``model`` (wrappers
    and TTA models unwrapped) if it fits exactly.

    Raises:
        CheckpointMismatchError: It holds no state dict or does not fit the model exactly.
    """
    model = _unwrap(model)
    state = _state(checkpoint, source)
    check_state_dict(model.state_dict(), state, source)
    model.load_state_dict(state, strict=True)


def load_checkpoint_strict(model: nn.Module, filename: str, map_location: Any = "cpu") -> Any:
    """Read a checkpoint file (``weights_only=True``), load it strictly and return it."""
    checkpoint = load_checkpoint_file(filename, map_location=map_location)
    load_state_dict_strict(model, checkpoint, filename)
    return checkpoint
