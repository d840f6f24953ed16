"""Strict checkpoint loading: mmengine loads non-strictly (a classifier of another class count
stays random); here a mismatch is one :class:`CheckpointMismatchError` line."""

import re
from typing import Any

from mmengine.model import BaseTTAModel, is_model_wrapper
from torch import nn

from hamseg.compat.checkpoint import load_checkpoint_file
from hamseg.models.release_weights import unwrap_state_dict
from hamseg.utils.errors import UsageError, first_items

CLASSIFIER = re.compile(r"(^|\.)conv_seg\.(weight|bias)$")  # mmseg heads' last 1x1 conv


class CheckpointMismatchError(UsageError):
    """A checkpoint does not fit the model exactly."""


def check_checkpoint(model: nn.Module, checkpoint: Any, source: str) -> dict:
    """The state dict of a loaded ``checkpoint`` if its names and shapes are exactly ``model``'s
    (wrappers unwrapped), else one line naming the layer, both shapes and both class counts."""
    while is_model_wrapper(model) or isinstance(model, BaseTTAModel):
        model = model.module
    own = model.state_dict()
    try:
        state = unwrap_state_dict(checkpoint)
    except TypeError as err:
        raise CheckpointMismatchError(f"checkpoint {source!r} holds no state dict: {err}") from None
    classes = lambda k: CLASSIFIER.search(k) and state[k].shape[0] != own[k].shape[0]
    bad = [k for k in own if k in state and state[k].shape != own[k].shape]
    bad.sort(key=lambda k: not classes(k))  # a classifier of another class count first
    missing, unexpected = [k for k in own if k not in state], [k for k in state if k not in own]
    parts = []
    if bad:
        have, want = tuple(state[bad[0]].shape), tuple(own[bad[0]].shape)
        parts.append(f"{bad[0]} is {have} in the checkpoint and {want} in the model")
        if classes(bad[0]):
            parts[0] += (
                f": the checkpoint has {have[0]} classes, the config has {want[0]} (to use this "
                f"checkpoint, set num_classes={have[0]}; to train a {want[0]}-class model from "
                "it, fine-tune with load_from)"
            )
        parts[0] += f"; other shape mismatches: {first_items(bad[1:], 3)}" if bad[1:] else ""
    for keys, (a, b) in ((missing, ("model", "checkpoint")), (unexpected, ("checkpoint", "model"))):
        if keys:
            parts.append(f"{len(keys)} {a} tensors are not in the {b} ({first_items(keys, 3)})")
    if parts:
        hint = "" if bad else " (is it a checkpoint of another model? pass its config)"
        raise CheckpointMismatchError(
            f"checkpoint {source!r} does not fit the model: {'; '.join(parts)}{hint}"
        )
    return state


def check_checkpoint_file(model: nn.Module, filename: str) -> None:
    """:func:`check_checkpoint` of a file (nothing is loaded into ``model``)."""
    check_checkpoint(model, load_checkpoint_file(filename), filename)
