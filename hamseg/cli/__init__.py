"""The command-line layer: what every tool shares (:mod:`.common`), ``--cfg-options``
(:mod:`.options`), the checks before iteration 1 (:mod:`.preflight`), ``--resume``
(:mod:`.resume`)."""

from .common import (
    LAUNCHERS,
    CLIError,
    add_guard_hooks,
    build_config,
    enable_amp,
    log_notices,
    notice,
    run_cli,
    user_message,
)
from .options import merge_cfg_options

__all__ = [
    "LAUNCHERS",
    "CLIError",
    "add_guard_hooks",
    "build_config",
    "enable_amp",
    "log_notices",
    "merge_cfg_options",
    "notice",
    "run_cli",
    "user_message",
]
