"""``import hamseg`` without any mmcv: one ImportError line that says what to install."""

from __future__ import annotations

import subprocess
import sys

from hamseg.compat.mmcv_check import MISSING_MMCV_MESSAGE


def import_hamseg_with(block: str) -> subprocess.CompletedProcess:
    code = f"import sys\n{block}\nimport hamseg\n"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)


def test_no_mmcv_says_what_to_install():
    result = import_hamseg_with("sys.modules['mmcv'] = None  # as if neither mmcv is installed")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == f"ImportError: {MISSING_MMCV_MESSAGE}"
    assert "pip install 'hamseg[lite]'" in MISSING_MMCV_MESSAGE


def test_a_broken_mmcv_keeps_its_own_error():
    result = import_hamseg_with("sys.modules['mmcv.version'] = None  # mmcv present but broken")
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert "mmcv.version" in last and MISSING_MMCV_MESSAGE not in result.stderr
