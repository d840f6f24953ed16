"""RandomStateHook's pieces: generator states survive a weights_only checkpoint round trip, and
the restore waits for resume's dataloader fast-forward. (The end-to-end proof, an interrupted
and resumed run equal bit for bit to an uninterrupted one, is in test_preemption.py.)"""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import torch

from hamseg.engine.random_state import _RestoreAfterSkip, get_rng_state, set_rng_state


def draws() -> tuple:
    return random.random(), float(np.random.rand()), np.random.randn(), torch.rand(3).tolist()


def test_states_round_trip_through_a_weights_only_checkpoint(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.randn()  # a cached Gaussian is part of numpy's state
    path = str(tmp_path / "iter_1.pth")
    torch.save(dict(rng_state=get_rng_state()), path)
    expected = draws()
    assert draws() != expected  # the generators moved on
    set_rng_state(torch.load(path, weights_only=True)["rng_state"])
    assert draws() == expected


def test_restore_happens_after_the_last_skipped_batch():
    state = get_rng_state()
    loop = SimpleNamespace(dataloader_iterator=iter(range(10)))
    inner = loop.dataloader_iterator
    loop.dataloader_iterator = _RestoreAfterSkip(loop, 3, state)
    expected = draws()
    skipped = [next(loop.dataloader_iterator) for _ in range(3)]  # what mmengine's run() does
    assert skipped == [0, 1, 2]
    assert loop.dataloader_iterator is inner  # handed back
    assert draws() == expected  # the random draws during the skip are undone
    assert next(loop.dataloader_iterator) == 3


def test_every_ranks_state_is_saved_and_another_world_size_says_what_is_not_exact(monkeypatch):
    from hamseg.engine.random_state import RandomStateHook, gather_rng_states

    hook = RandomStateHook()
    loop = SimpleNamespace(dataloader_iterator=None)
    runner = SimpleNamespace(hooks=[hook], iter=7, train_loop=loop)
    gather_rng_states(runner)  # one rank here: all_gather_object gives [its state]
    checkpoint: dict = {}
    hook.before_save_checkpoint(runner, checkpoint)
    assert len(checkpoint["rng_state"]) == 1
    runner.iter = 8  # not gathered for this iteration: the main rank's own
    hook.before_save_checkpoint(runner, checkpoint)
    assert len(checkpoint["rng_state"]) == 1
    expected = draws()
    hook.after_load_checkpoint(runner, dict(rng_state=checkpoint["rng_state"][0]))  # old format
    hook.before_train(runner)  # epoch-based: restored at once
    assert draws() == expected
    hook.after_load_checkpoint(runner, dict(rng_state=[get_rng_state()] * 2))
    logged: list[str] = []
    monkeypatch.setattr("hamseg.engine.random_state.print_log", lambda m, *_: logged.append(m))
    hook.before_train(runner)
    out = logged[0]
    assert "holds the random states of 2 rank(s), this run has 1: not restored" in out
