"""The command-line layer: what every tool shares (:mod:`.common`; a checkout's tools/lib/ holds
what one tool alone uses: the checks before iteration 1, ``--resume``, the batch check)."""

from .common import (
    GUARD_HOOKS,
    LAUNCHERS,
    CLIError,
    add_guard_hooks,
    build_config,
    cfg_options_argv,
    enable_amp,
    run_cli,
    user_message,
)

__all__ = [
    "GUARD_HOOKS",
    "LAUNCHERS",
    "CLIError",
    "add_guard_hooks",
    "build_config",
    "cfg_options_argv",
    "enable_amp",
    "run_cli",
    "user_message",
]
