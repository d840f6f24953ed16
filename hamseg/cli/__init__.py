"""The command-line layer: what every tool shares (:mod:`.common`), checks before iteration 1
(:mod:`.preflight`), ``--resume`` (:mod:`.resume`)."""

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
