"""Leaving the process group: a stopped or finished distributed run exits with its own code.

Two real gloo processes (subprocesses with a timeout) leave through ``run_cli``. Before
``leave_process_group``, the interpreter's teardown destroyed the process group while its gloo
threads still ran, and now and then a thread dropping a tensor then aborted the process (SIGABRT
instead of exit code 65, 2 of 26 two-rank divergence runs here). The tests check the
cause, deterministically: no gloo thread is left when the interpreter starts to finalize.
"""

from __future__ import annotations

import os
import os.path as osp

import pytest
import torch

from hamseg.engine.stop import leave_process_group
from tests.conftest import REPO
from tests.robust.helpers import finish, start_tool

WORKER = osp.join(REPO, "tests", "engine", "stop_worker.py")
NAMED_GLOO_THREADS = tuple(map(int, torch.__version__.split(".")[:2])) >= (2, 14)


def run_ranks(extra: list[str], port: int) -> list[tuple[int, str]]:
    """Run stop_worker.py as ranks 0 and 1 of one gloo group; their exit codes and output."""
    env = dict(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2")
    ranks = [start_tool([WORKER, *extra], dict(env, RANK=str(rank))) for rank in range(2)]
    return [finish(proc, lines, timeout=120) for proc, lines in ranks]


@pytest.mark.slow  # two gloo ranks, twice: ~12 s each
@pytest.mark.parametrize("stop, code", [(True, 65), (False, 0)], ids=["stopped", "finished"])
def test_no_gloo_thread_is_left_when_the_interpreter_finalizes(stop, code):
    port = 29700 + os.getpid() % 200 + (0 if stop else 1) * 211
    for exit_code, output in run_ranks(["--stop"] if stop else [], port):
        assert exit_code == code, output[-3000:]
        if NAMED_GLOO_THREADS:  # torch 2.6's gloo threads have no names to look for
            assert "gloo threads while training: ['gloo_tcp_loop', 'pt_gloo_runloop'" in output
        assert "gloo threads at exit: []" in output, output[-3000:]
        assert "terminate called" not in output


def test_without_a_process_group_there_is_nothing_to_leave():
    assert leave_process_group() is False
