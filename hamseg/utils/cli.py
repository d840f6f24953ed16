"""What tools/train.py and tools/test.py share: config, overrides, launcher, clean errors."""

from __future__ import annotations

import os
import os.path as osp
import sys
from collections.abc import Callable

from mmengine.config import Config

from hamseg.compat import setup_cpu_distributed

__all__ = ["CLIError", "build_config", "require_file", "run_cli"]


class CLIError(Exception):
    """A user-facing error: printed as one line, exit code 2, no traceback."""


def require_file(path: str, what: str) -> str:
    """Return ``path`` if it is a file, else raise :class:`CLIError` naming it."""
    if not osp.isfile(path):
        raise CLIError(f"{what} not found: {path}")
    return path


def build_config(
    config: str,
    cfg_options: dict | None = None,
    work_dir: str | None = None,
    launcher: str = "none",
) -> Config:
    """Load a config as mmseg's tools do and prepare the launcher.

    Args:
        config: Path of the config file.
        cfg_options: ``--cfg-options`` overrides.
        work_dir: ``--work-dir``; default ``./work_dirs/<config name>``.
        launcher: 'none', 'pytorch' or 'slurm'. On CPU machines a gloo group is set up here.

    Returns:
        The config, with ``launcher`` and ``work_dir`` set.
    """
    cfg = Config.fromfile(require_file(config, "config file"))
    cfg.launcher = launcher
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get("work_dir") is None:
        cfg.work_dir = osp.join("./work_dirs", osp.splitext(osp.basename(config))[0])
    os.environ.setdefault("LOCAL_RANK", "0")
    setup_cpu_distributed(cfg, launcher)
    return cfg


def run_cli(main: Callable[[], None]) -> None:
    """Run ``main``; a user-facing error becomes one line on stderr and exit code 2.

    User-facing: :class:`CLIError`, a missing file or dataset, an invalid sample (bad label,
    corrupt image), and a checkpoint refused as unsafe or corrupt. Anything else keeps its
    traceback.
    """
    from hamseg.compat.checkpoint import CorruptCheckpointError, UnsafeCheckpointError
    from hamseg.datasets.checks import InvalidSampleError

    user_errors = (
        CLIError,
        FileNotFoundError,
        InvalidSampleError,
        UnsafeCheckpointError,
        CorruptCheckpointError,
    )
    try:
        main()
    except user_errors as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        sys.exit(2)
