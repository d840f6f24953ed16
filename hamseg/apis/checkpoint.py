"""Strict checkpoint loading: mmengine loads non-strictly (a classifier of another class count
stays random); here a mismatch is one :class:`CheckpointMismatchError` line naming the layer,
both shapes and both class counts."""

from __future__ import annotations

import re
from typing import Any

from mmengine.model import BaseTTAModel, is_model_wrapper
from torch import nn

from hamseg.compat.checkpoint import load_checkpoint_file
from hamseg.models.release_weights import unwrap_state_dict
from hamseg.utils.errors import UsageError

CLASSIFIER = re.compile(r"(^|\.)conv_seg\.(weight|bias)$")  # mmseg heads' last 1x1 conv


class CheckpointMismatchError(UsageError):
    """A checkpoint does not fit the model exactly (one line: where and how)."""


def _names(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _diff(model: nn.Module, checkpoint: Any, source: str) -> tuple:
    """(model's state, checkpoint's state, misshaped names with a classifier of another class
    count first, missing names, unexpected names); wrappers and TTA models are unwrapped."""
    while is_model_wrapper(model) or isinstance(model, BaseTTAModel):
        model = model.module
    own = model.state_dict()
    try:
        state = unwrap_state_dict(checkpoint)
    except TypeError as err:
        raise CheckpointMismatchError(f"checkpoint {source!r} holds no state dict: {err}") from None
    bad = [k for k in own if k in state and state[k].shape != own[k].shape]
    bad.sort(key=lambda k: (not _classes(k, state, own), not CLASSIFIER.search(k)))
    return own, state, bad, [k for k in own if k not in state], [k for k in state if k not in own]


def _classes(name: str, state: dict, own: dict) -> str:
    n, m = state[name].shape[0], own[name].shape[0]
    if not CLASSIFIER.search(name) or n == m:
        return ""
    return f": the checkpoint has {n} classes, the config has {m}"


def check_checkpoint(model: nn.Module, checkpoint: Any, source: str) -> dict:
    """The state dict of a loaded ``checkpoint`` if its names and shapes are exactly
    ``model``'s, else :class:`CheckpointMismatchError`."""
    own, state, bad, missing, unexpected = _diff(model, checkpoint, source)
    parts = []
    if bad:
        have, want = tuple(state[bad[0]].shape), tuple(own[bad[0]].shape)
        parts.append(f"{bad[0]} is {have} in the checkpoint and {want} in the model")
        if _classes(bad[0], state, own):
            parts[0] += f"{_classes(bad[0], state, own)} (to use this checkpoint, set "
            parts[0] += f"num_classes={have[0]}; to train a {want[0]}-class model from it, "
            parts[0] += "fine-tune with load_from)"
        parts[0] += f"; other shape mismatches: {_names(bad[1:])}" if bad[1:] else ""
    if missing:
        parts.append(f"{len(missing)} model tensors are not in the checkpoint ({_names(missing)})")
    if unexpected:
        parts.append(f"{len(unexpected)} checkpoint tensors are not in the model")
        parts[-1] += f" ({_names(unexpected)})"
    if parts:
        hint = "" if bad else " (is it a checkpoint of another model? pass its config)"
        message = f"checkpoint {source!r} does not fit the model: {'; '.join(parts)}{hint}"
        raise CheckpointMismatchError(message)
    return state


def check_checkpoint_file(model: nn.Module, filename: str) -> None:
    """:func:`check_checkpoint` of a file, loading nothing into ``model``."""
    check_checkpoint(model, load_checkpoint_file(filename), filename)


def load_state_dict_strict(model: nn.Module, checkpoint: Any, source: str) -> None:
    """Load a loaded checkpoint into ``model`` (wrappers unwrapped) if it fits exactly."""
    while is_model_wrapper(model) or isinstance(model, BaseTTAModel):
        model = model.module
    model.load_state_dict(check_checkpoint(model, checkpoint, source), strict=True)


def reinitialised_by_load_from(model: nn.Module, filename: str) -> str | None:
    """One line naming the tensors that fine-tuning from ``filename`` (mmengine's non-strict
    ``load_from``) leaves at their fresh init; None if all load."""
    own, state, bad, missing, _ = _diff(model, load_checkpoint_file(filename), filename)
    why = _classes(bad[0], state, own) if bad else ""
    parts = [f"{_names(bad)} keep their fresh init (shape differs{why})"] if bad else []
    parts += [f"{_names(missing)} are not in the checkpoint (fresh init)"] if missing else []
    if parts:
        return f"load_from {filename!r}: {'; '.join(parts)}; every other tensor is loaded"
    return None
