"""hamseg.compat.checkpoint: mmengine checkpoints load with weights_only=True; nothing else does."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import torch
from mmengine.logging import HistoryBuffer, MessageHub

from hamseg.compat.checkpoint import MMENGINE_CHECKPOINT_TYPES


def test_message_hub_state_round_trips_with_weights_only(tmp_path):
    hub = MessageHub.get_instance("allowlist-test")
    hub.update_scalar("train/loss", np.float64(0.5))
    hub.update_scalar("train/lr", 0.01)
    hub.update_info("iter", 7)
    hub.update_info("dataset_meta", dict(classes=("a", "b"), palette=[[0, 0, 0], [1, 2, 3]]))
    path = tmp_path / "ckpt.pth"
    torch.save(dict(message_hub=hub.state_dict(), meta=dict(seed=np.int64(3))), path)
    loaded = torch.load(path, weights_only=True)
    buffer = loaded["message_hub"]["log_scalars"]["train/loss"]
    assert isinstance(buffer, HistoryBuffer) and buffer.current() == 0.5
    assert loaded["meta"]["seed"] == 3
    assert set(torch.serialization.get_unsafe_globals_in_checkpoint(path)) <= {
        f"{t.__module__}.{t.__qualname__}" for t in MMENGINE_CHECKPOINT_TYPES
    }


class Payload:
    """Pickles to a call of os.system: loading it with weights_only=False would run a command."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_checkpoint_with_a_pickled_callable_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pth"
    torch.save({"state_dict": {}, "x": Payload(marker)}, path)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path)  # the default (weights_only=True) is kept by hamseg
    from mmengine.runner import CheckpointLoader

    with pytest.raises(Exception, match="system|weights_only|unsafe|refused"):
        CheckpointLoader.load_checkpoint(str(path), map_location="cpu")
    assert not marker.exists()
