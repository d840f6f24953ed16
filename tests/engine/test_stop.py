"""Leaving the process group: a stopped or finished distributed run exits with its own code.

Two real gloo processes (subprocesses with a timeout) leave through ``run_cli``. Before
``leave_process_group``, the interpreter's teardown destroyed the process group while its gloo
threads still ran, and now and then a thread dropping a tensor then aborted the process (SIGABRT
instead of exit code 65, about one 2-rank run in six on a loaded machine). The tests check the
cause, deterministically: no gloo thread is left when the interpreter starts to finalize.
"""

from __future__ import annotations

import os
import os.path as osp
import subprocess
import sys

import pytest

from hamseg.engine.stop import leave_process_group
from tests.conftest import REPO

WORKER = osp.join(REPO, "tests", "engine", "stop_worker.py")


def run_ranks(extra: list[str], port: int) -> list[subprocess.CompletedProcess]:
    """Run stop_worker.py as ranks 0 and 1 of one gloo group; their exit codes and output."""
    procs = []
    for rank in range(2):
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=REPO, MASTER_ADDR="127.0.0.1")
        env.update(MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2")
        procs.append(
            subprocess.Popen(
                [sys.executable, WORKER, *extra],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    results = []
    for proc in procs:
        try:
            output, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, output))
    return results


@pytest.mark.parametrize("stop, code", [(True, 65), (False, 0)], ids=["stopped", "finished"])
def test_no_gloo_thread_is_left_when_the_interpreter_finalizes(stop, code):
    port = 29700 + os.getpid() % 200 + (0 if stop else 1) * 211
    for result in run_ranks(["--stop"] if stop else [], port):
        assert result.returncode == code, result.stdout[-3000:]
        assert "gloo threads while training: ['gloo_tcp_loop', 'pt_gloo_runloop'" in result.stdout
        assert "gloo threads at exit: []" in result.stdout, result.stdout[-3000:]
        assert "terminate called" not in result.stdout


def test_without_a_process_group_there_is_nothing_to_leave():
    assert leave_process_group() is False
