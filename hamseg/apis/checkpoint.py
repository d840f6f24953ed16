"""Strict checkpoint loading for every model used for evaluation or inference.

mmengine's ``load_checkpoint`` (which ``mmseg.apis.init_model`` and ``Runner.load_from`` use) loads
with ``strict=False``: a checkpoint whose classifier has another number of classes than the config
logs a warning, keeps the randomly initialised classifier and then predicts or evaluates with it,
a silently wrong result. :func:`load_checkpoint_strict` loads a checkpoint only if it fills the
model exactly (every name present, no extra names, every shape equal) and otherwise raises
:class:`CheckpointMismatchError` with one line that names the layer and both shapes, and for a
classifier says how many classes each side has::

    checkpoint 'ckpt.pth' does not fit the model: decode_head.conv_seg.weight is (3, 128, 1, 1)
    in the checkpoint and (5, 128, 1, 1) in the model: the checkpoint has 3 classes, the config
    has 5 (...)

The error is a :class:`~hamseg.utils.errors.UsageError`, so a tool run through
:func:`hamseg.cli.run_cli` prints that line and exits with code 2.

Fine-tuning with ``load_from`` and a new class count is a different case (the classifier is meant
to be re-initialised) and does not go through these functions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mmengine.model import BaseTTAModel, is_model_wrapper
from torch import Tensor, nn

from hamseg.compat.checkpoint import load_checkpoint_file
from hamseg.models.release_weights import unwrap_state_dict
from hamseg.utils.errors import UsageError

__all__ = [
    "CheckpointMismatchError",
    "check_checkpoint_file",
    "check_state_dict",
    "load_checkpoint_strict",
    "load_state_dict_strict",
    "reinitialised_by_load_from",
]

#: A classifier's tensors: mmseg's decode and auxiliary heads name their last 1x1 conv conv_seg.
_CLASSIFIER = re.compile(r"(^|\.)conv_seg\.(weight|bias)$")
#: Names listed in a message before "and N more".
_SHOWN = 3


class CheckpointMismatchError(UsageError):
    """A checkpoint does not fit the model exactly; the one-line message says where and how."""


def _shape(tensor: Tensor) -> str:
    return str(tuple(tensor.shape))


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def _class_counts(
    name: str, checkpoint_state: Mapping[str, Tensor], model_state: Mapping[str, Tensor]
) -> tuple[int, int] | None:
    """(checkpoint's, model's) class count if ``name`` is a classifier tensor whose number of
    classes (output channels, dim 0) differs; None otherwise (e.g. only its input channels
    differ)."""
    if not _CLASSIFIER.search(name):
        return None
    have, want = checkpoint_state[name].shape[0], model_state[name].shape[0]
    return (have, want) if have != want else None


def check_state_dict(
    model_state: Mapping[str, Tensor], checkpoint_state: Mapping[str, Tensor], source: str
) -> None:
    """Raise unless ``checkpoint_state`` has exactly the names and shapes of ``model_state``.

    Args:
        model_state: The model's ``state_dict()``.
        checkpoint_state: The state dict read from the checkpoint.
        source: What to call the checkpoint in the message (usually its path).

    Raises:
        CheckpointMismatchError: One line: the shape mismatches first (name and both shapes; for
            a classifier of another class count ``the checkpoint has N classes, the config has
            M``), then the names the checkpoint lacks and the names the model does not have.
    """
    misshaped = [
        k
        for k in model_state
        if k in checkpoint_state and checkpoint_state[k].shape != model_state[k].shape
    ]
    missing = [k for k in model_state if k not in checkpoint_state]
    unexpected = [k for k in checkpoint_state if k not in model_state]
    if not (misshaped or missing or unexpected):
        return
    parts = []
    if misshaped:
        # First a classifier of another class count, then any classifier, then the first name.
        first = next(
            (k for k in misshaped if _class_counts(k, checkpoint_state, model_state)),
            next((k for k in misshaped if _CLASSIFIER.search(k)), misshaped[0]),
        )
        part = (
            f"{first} is {_shape(checkpoint_state[first])} in the checkpoint and "
            f"{_shape(model_state[first])} in the model"
        )
        classes = _class_counts(first, checkpoint_state, model_state)
        if classes is not None:
            have, want = classes
            part += (
                f": the checkpoint has {have} classes, the config has {want} (to use this "
                f"checkpoint, set num_classes={have} in the config; to train a {want}-class "
                "model from it, fine-tune with load_from)"
            )
        others = [k for k in misshaped if k != first]
        if others:
            part += f"; other shape mismatches: {_names(others)}"
        parts.append(part)
    if missing:
        parts.append(f"{len(missing)} model tensors are not in the checkpoint ({_names(missing)})")
    if unexpected:
        parts.append(
            f"{len(unexpected)} checkpoint tensors are not in the model ({_names(unexpected)})"
        )
    hint = "" if misshaped else " (is it a checkpoint of another model? pass its config)"
    raise CheckpointMismatchError(
        f"checkpoint {source!r} does not fit the model: " + "; ".join(parts) + hint
    )


def _unwrap(model: nn.Module) -> nn.Module:
    """The segmentor inside a DDP (or other mmengine) wrapper or a TTA model, as mmengine's
    loader does."""
    while is_model_wrapper(model) or isinstance(model, BaseTTAModel):
        model = model.module
    return model


def _state(checkpoint: Any, source: str) -> Mapping[str, Tensor]:
    try:
        return unwrap_state_dict(checkpoint)
    except TypeError as err:
        raise CheckpointMismatchError(f"checkpoint {source!r} holds no state dict: {err}") from None


def check_checkpoint_file(model: nn.Module, filename: str) -> None:
    """Check, without loading it, that the checkpoint file fits ``model`` exactly.

    ``tools/test.py`` calls it before mmengine's runner loads the checkpoint (non-strictly),
    so a checkpoint of another class count stops before any evaluation.

    Raises:
        CheckpointMismatchError: As :func:`check_state_dict`.
    """
    checkpoint = load_checkpoint_file(filename, map_location="cpu")
    check_state_dict(_unwrap(model).state_dict(), _state(checkpoint, filename), filename)


def reinitialised_by_load_from(model: nn.Module, filename: str) -> str | None:
    """What fine-tuning from ``filename`` leaves at its fresh init, as one line (None: nothing).

    mmengine loads ``load_from`` non-strictly: tensors whose shape differs (the classifier of
    another class count) keep the model's init, which is what fine-tuning wants. This says so
    in one line (``tools/train.py`` logs it before mmengine's multi-line size-mismatch report).
    """
    state = _state(load_checkpoint_file(filename, map_location="cpu"), filename)
    own = _unwrap(model).state_dict()
    changed = [k for k in own if k in state and state[k].shape != own[k].shape]
    missing = [k for k in own if k not in state]
    if not (changed or missing):
        return None
    parts = []
    if changed:
        parts.append(f"{_names(changed)} keep their fresh init (shape differs")
        classes = next(
            (c for c in (_class_counts(k, state, own) for k in changed) if c is not None), None
        )
        if classes is not None:
            parts[-1] += f": the checkpoint has {classes[0]} classes, the config has {classes[1]}"
        parts[-1] += ")"
    if missing:
        parts.append(f"{_names(missing)} are not in the checkpoint (fresh init)")
    return f"load_from {filename!r}: " + "; ".join(parts) + "; every other tensor is loaded"


def load_state_dict_strict(model: nn.Module, checkpoint: Any, source: str) -> None:
    """Check ``checkpoint`` against ``model`` with :func:`check_state_dict`, then load it.

    Args:
        model: The segmentor (a DDP or other mmengine model wrapper, and a test-time
            augmentation model such as mmseg's ``SegTTAModel``, are unwrapped).
        checkpoint: A loaded checkpoint: a state dict, or a dict holding one under
            ``state_dict`` (mmengine), ``net`` or ``model``; a ``module.`` prefix is removed.
        source: What to call the checkpoint in messages (usually its path).

    Raises:
        CheckpointMismatchError: If it holds no state dict or does not fit the model exactly.
    """
    model = _unwrap(model)
    state = _state(checkpoint, source)
    check_state_dict(model.state_dict(), state, source)
    model.load_state_dict(state, strict=True)


def load_checkpoint_strict(model: nn.Module, filename: str, map_location: Any = "cpu") -> Any:
    """Load a checkpoint file into ``model`` only if it fits exactly.

    The file is read as every hamseg checkpoint is (``weights_only=True``,
    :func:`hamseg.compat.checkpoint.load_checkpoint_file`).

    Args:
        model: The segmentor (model wrappers and TTA models are unwrapped).
        filename: Path or URL of the checkpoint.
        map_location: As for :func:`torch.load`.

    Returns:
        The loaded checkpoint (its ``meta`` carries the config and the dataset's classes).

    Raises:
        CheckpointMismatchError: If the checkpoint does not fit the model exactly.
        FileNotFoundError, UnsafeCheckpointError, CorruptCheckpointError: From the loader.
    """
    checkpoint = load_checkpoint_file(filename, map_location=map_location)
    load_state_dict_strict(model, checkpoint, filename)
    return checkpoint
