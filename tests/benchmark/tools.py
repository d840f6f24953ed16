"""Run a tools/ script in a fresh process, as a user does."""

from __future__ import annotations

import os.path as osp
import subprocess
import sys

from tests.conftest import REPO


def run_tool(script: str, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """``python tools/<script> args...`` from the checkout; fails the test unless it exits 0."""
    cmd = [sys.executable, osp.join(REPO, "tools", script), *args]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result
